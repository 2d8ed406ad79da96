"""See a run: one self-contained HTML report (curves, win rates, design funnel, archive browser
with environment pages), the same pages served live, and terminal summaries.

``build_report(run_dir, out, k=...)`` writes the file (:mod:`spadework.report.page`);
``serve_report(run_dir, ...)`` serves it on loopback, refreshed as iterations land
(:mod:`spadework.report.serve`). Data comes from the run's archive opened read-only
(:mod:`spadework.report.collect`); plots are drawn here as SVG (:mod:`spadework.report.svg`).
"""

from spadework.report.page import DEFAULT_EPISODES, ReportSummary, build_report

__all__ = ["DEFAULT_EPISODES", "ReportSummary", "build_report"]
