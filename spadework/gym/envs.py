"""Importing this module registers the starter environments with Gymnasium, so that Gymnasium
1.x's module-qualified ids work: ``gymnasium.make("spadework.gym.envs:spadework/Maze-v0")``.
It is the one spadework module with an import side effect, and nothing else imports it."""

from spadework.gym.registration import register_envs

register_envs()
