"""The counterfeit coin: find the odd coin with a balance scale.

Some coins look identical; exactly one is counterfeit. Each weighing compares two equal-sized,
disjoint groups of coins and reports which pan is heavier, or that they balance. The task shows
every weighing made so far; a good weighing splits the coins that could still be fake into three
near-equal parts (two on the pans, one off the scale).

Levels (a bigger instance of the same rules at each):

1. 3 coins, the fake is known to be heavier, and one weighing has been made: the fake against
   another coin, so the answer is read from its result (one move; the example answers with a
   coin that does not exist, so copying it costs a turn, not the game);
2. 6 to 9 coins, the fake is known to be heavier: two weighings;
3. 8 to 12 coins, the fake is heavier or lighter (unknown): three weighings;
4. 20 to 30 coins, heavier or lighter: four weighings (the former starter's size).

A level needs one turn per weighing plus the answer; under a tighter ``max_turns`` the game plays
the largest level that fits (level ``min(level, max_turns - 1)``). Coins carry two-digit numbers
drawn per seed, so no fixed reply wins across seeds.

Actions: ``\\boxed{weigh 12 31 vs 47 58}`` and, once, ``\\boxed{answer 47 heavy}`` or
``\\boxed{answer 47 light}``. Reward 1.0 for the right coin and direction; a wrong answer ends
the game with 0.0. ``solution()`` weighs as an agent could, each weighing chosen from the earlier
results, and answers when one possibility is left.
"""

import re
from gameenv import GameEnv

ENV_CLASS = "CoinBalanceEnv"
SETTING = "games"
SKILL = "logical deduction"

# level -> (fewest coins, most coins, fake known to be heavier, weighings needed)
SIZES = {1: (3, 3, True, 1), 2: (6, 9, True, 2), 3: (8, 12, False, 3), 4: (20, 30, False, 4)}

_WEIGH = re.compile(r"^weigh\s*:?\s*(.+?)\s+(?:vs\.?|versus|against|and)\s+(.+)$", re.IGNORECASE)
# "12 31 vs 47 58" without the word weigh: a weighing all the same (the 0.5B agent writes it)
_BARE_WEIGH = re.compile(r"^(?:coins?\s*)?\d[\d\s,]*\s(?:vs\.?|versus|against)\s", re.IGNORECASE)
_ANSWER = re.compile(r"^(?:answer\s*:?\s*)?(?:coin\s*)?(\d+)\s*,?\s*(?:is\s+)?(heavy|heavier|light|lighter)?$",
                     re.IGNORECASE)
_SAID = {1: "the left pan is heavier", -1: "the right pan is heavier", 0: "the pans balance"}


def _coins(text):
    """The coin numbers of one pan's text ("12 31", "coins 12, 31"), or None if it has others."""
    text = re.sub(r"\bcoins?\b", " ", text, flags=re.IGNORECASE)
    if re.search(r"[^\d\s,+&]", text):
        return None
    return [int(x) for x in re.findall(r"\d+", text)]


def _fits(coin, sign, left, right, result):
    """Whether coin `coin` being fake (sign +1 heavy, -1 light) explains `result`."""
    effect = sign if coin in left else -sign if coin in right else 0
    return effect == result


class CoinBalanceEnv(GameEnv):
    """One counterfeit among n numbered coins; weigh groups, then name it and its direction."""

    LEVELS = 4

    def setup(self, rng):
        self.size = max(1, min(self.level, self.max_turns - 1))
        low, high, self.known_heavy, self.needed = SIZES[self.size]
        self.n = rng.randint(low, high)
        self.coins = sorted(rng.sample(range(10, 100), self.n))
        self.fake = rng.choice(self.coins)
        self.heavy = True if self.known_heavy else rng.random() < 0.5
        self.log = []  # (left, right, result): result 1 left heavier, -1 right heavier, 0 balance
        if self.size == 1:  # the weighing that settles it is already made: read the answer off it
            pans = [self.fake, rng.choice([c for c in self.coins if c != self.fake])]
            rng.shuffle(pans)
            self.log.append(([pans[0]], [pans[1]], self._weigh([pans[0]], [pans[1]])))

    # -- what the agent sees ----------------------------------------------------------------------

    def task(self):
        if self.size == 1:
            return self._task_one()
        listed = ", ".join(map(str, self.coins[:-1])) + f" and {self.coins[-1]}"
        kind = ("It is heavier than the others." if self.known_heavy else
                "It is either heavier or lighter than the others; you do not know which.")
        lines = [
            f"Find the fake coin with a balance scale. There are {self.n} coins, numbered "
            f"{listed}. Exactly one of them is fake. {kind}",
            "To weigh, write weigh, the coins for the left pan, vs, and the coins for the right "
            f"pan, with the same number of coins on each side (for example weigh {self.coins[0]} "
            f"vs {self.coins[1]}). The scale says which pan is heavier, or that the pans balance.",
            "To answer, write answer, the number of the fake coin, and heavy or light. You may "
            "answer only once: a wrong answer loses.",
        ]
        if self.log:
            lines.append("Weighings so far:")
            lines += [f"  weigh {self._pan(left)} vs {self._pan(right)}: {_SAID[result]}"
                      for left, right, result in self.log]
        else:
            lines.append("No weighings yet.")
        return "\n".join(lines)

    def _task_one(self):
        """Level 1: three coins, the fake heavier, a weighing already made; one step to answer."""
        lines = [f"Coin {self.coins[0]}, coin {self.coins[1]} and coin {self.coins[2]} look alike, "
                 "but one of them is a fake that is heavier than the others."]
        for left, right, result in self.log:
            if result and len(left) == 1:
                heavy, light = (left, right) if result > 0 else (right, left)
                lines.append(f"On a balance scale, coin {heavy[0]} is heavier than coin {light[0]}.")
            else:
                lines.append(f"On a balance scale, weigh {self._pan(left)} vs {self._pan(right)}: "
                             f"{_SAID[result]}.")
        lines.append("Which coin is fake? Write answer, its number and heavy. You may answer only "
                     "once.")
        return "\n".join(lines)

    def example(self):
        if self.size == 1:  # the answer's form, with a coin that does not exist: not a move
            return f"answer {min(set(range(10, 20)) - set(self.coins))} heavy"
        return f"weigh {self.coins[0]} vs {self.coins[1]}"

    def judge(self, move):
        move = move.strip()
        if _BARE_WEIGH.match(move):
            move = f"weigh {move}"
        weigh, answer = _WEIGH.match(move), _ANSWER.match(move)
        forms = (f"Write weigh {self.coins[0]} vs {self.coins[1]} to weigh, or answer followed by "
                 "a coin's number and heavy or light.")
        if answer:
            coin, word = int(answer.group(1)), (answer.group(2) or "").lower()
            if coin not in self.coins:
                return self.INVALID, f"There is no coin {coin}. {forms}"
            if not word and self.known_heavy:  # the fake is known to be heavier: the coin says it all
                word = "heavy"
            if not word:
                return self.INVALID, f"Say whether coin {coin} is heavy or light. {forms}"
            heavy = word.startswith("heav")
            if coin == self.fake and heavy == self.heavy:
                return self.WIN, f"Correct: coin {coin} is the fake and it is {word}."
            return self.LOSE, f"Wrong: coin {coin} is not a {'heavy' if heavy else 'light'} fake."
        if not weigh:
            return self.INVALID, f"That is not a move. {forms}"
        left, right = _coins(weigh.group(1)), _coins(weigh.group(2))
        if left is None or right is None:
            return self.INVALID, f"Name the coins on each pan by their numbers. {forms}"
        problem = self._problem(left, right)
        if problem:
            return self.INVALID, f"{problem} The scale was not used. {forms}"
        result = self._weigh(left, right)
        self.log.append((left, right, result))
        return self.CONTINUE, f"The scale says: {_SAID[result]}."

    def hint(self):
        hyps = self._possible()
        coins = sorted({c for c, _ in hyps})
        if len(hyps) == 1:
            return "The weighings so far leave only one possibility: name it."
        return (f"{len(coins)} coins could still be fake. Split them into three groups of about "
                "the same size: one on each pan and one off the scale; a coin already known to be "
                "genuine can even out the pans.")

    def info(self):
        return {"turn": self.turn, "level": self.level, "coins": self.n, "weighings": len(self.log)}

    # -- the rules --------------------------------------------------------------------------------

    @staticmethod
    def _pan(coins):
        return " ".join(map(str, coins))

    def _problem(self, left, right):
        coins = left + right
        if not left or len(left) != len(right):
            return "Both pans need the same number of coins, at least one each."
        if len(set(coins)) != len(coins):
            return "A coin can be on only one pan, once."
        unknown = [c for c in coins if c not in self.coins]
        if unknown:
            return f"There is no coin {unknown[0]}."
        return ""

    def _weigh(self, left, right):
        """The scale's result for the hidden fake: 1 left heavier, -1 right heavier, 0 balance."""
        sign = 1 if self.heavy else -1
        return sign if self.fake in left else -sign if self.fake in right else 0

    def _possible(self, log=None):
        """(coin, sign) pairs that explain every weighing of `log` (the shown ones by default)."""
        signs = (1,) if self.known_heavy else (1, -1)
        hyps = [(c, s) for c in self.coins for s in signs]
        for left, right, result in self.log if log is None else log:
            hyps = [(c, s) for c, s in hyps if _fits(c, s, left, right, result)]
        return hyps

    # -- the solution: weighings chosen from the results so far -----------------------------------

    def solution(self):
        log, moves = list(self.log), []
        while True:
            hyps = self._possible(log)
            if len(hyps) <= 1 or len(moves) > 2 * self.n:  # (the second never happens)
                coin, sign = hyps[0] if hyps else (self.coins[0], 1)
                moves.append(self.box(f"answer {coin} {'heavy' if sign > 0 else 'light'}"))
                return moves
            left, right = self._plan(hyps)
            moves.append(self.box(f"weigh {self._pan(left)} vs {self._pan(right)}"))
            log.append((left, right, self._weigh(left, right)))  # the result the agent would see

    def _plan(self, hyps):
        """The next weighing for the possibilities `hyps`, in the fewest weighings that surely
        find the fake: unknown coins (either direction) are split so that a tilt leaves at most
        3^(w-1) possibilities and a balance at most (3^(w-1)-1)/2 unknown coins; coins known
        heavy-or-light are split into three groups of at most 3^(w-1)."""
        heavy = {c for c, s in hyps if s > 0}
        light = {c for c, s in hyps if s < 0}
        unknown = sorted(heavy & light)
        genuine = [c for c in self.coins if c not in heavy | light]
        h, l = sorted(heavy - light), sorted(light - heavy)
        if unknown:
            return self._split_unknown(unknown + h + l, genuine)
        return self._split_known(h, l, genuine)

    @staticmethod
    def _weighings(count, unknown, genuine):
        """The fewest weighings that surely settle `count` possibilities (`unknown` coins that
        may be heavy or light; otherwise coins of a known direction)."""
        w = 0
        if unknown:
            while count > (3 ** w - (1 if genuine else 3)) // 2:
                w += 1
        else:
            while count > 3 ** w:
                w += 1
        return w

    def _split_unknown(self, coins, genuine):
        u = len(coins)
        w = self._weighings(u, True, genuine)
        t = 3 ** (w - 1)
        low, high = max(1, u - (t - 1) // 2), min(u, t)
        m = min(high, max(low, round(2 * u / 3)))
        if not genuine and m % 2:
            m = m + 1 if m + 1 <= high else m - 1
        on = coins[:m]
        left, right = on[: (m + 1) // 2], on[(m + 1) // 2:]
        right = right + genuine[: len(left) - len(right)]
        return left, right

    def _split_known(self, heavy, light, genuine):
        k = len(heavy) + len(light)
        t = 3 ** (self._weighings(k, False, genuine) - 1)
        best = None
        for a in range(min(t, k) + 1):
            for b in range(min(t, k - a) + 1):
                if k - a - b > t or a + b == 0:
                    continue
                for ha in range(max(0, a - len(light)), min(a, len(heavy)) + 1):
                    la = a - ha
                    for hb in range(max(0, b - (len(light) - la)), min(b, len(heavy) - ha) + 1):
                        lb = b - hb
                        if lb < 0 or la + lb > len(light):
                            continue
                        # left pan: heavy group A and light group B; right: heavy B, light A
                        gap = abs((ha + lb) - (hb + la))
                        if gap > len(genuine):
                            continue
                        key = (max(a, b, k - a - b), gap, -a, -b, ha, hb)
                        if best is None or key < best[0]:
                            best = (key, ha, la, hb, lb)
        if best is None:  # too few genuine coins to even out the pans (never met in play)
            coins = heavy + light
            half = len(coins) // 2
            return coins[:half], coins[half:2 * half]
        _, ha, la, hb, lb = best
        left = heavy[:ha] + light[la:la + lb]
        right = heavy[ha:ha + hb] + light[:la]
        pad = genuine[: abs(len(left) - len(right))]
        return (left + pad, right) if len(left) < len(right) else (left, right + pad)
