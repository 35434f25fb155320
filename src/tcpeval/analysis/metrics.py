"""The paper's metrics (Sec. III-B), as pure vectorised functions over numpy arrays.

Conventions (the paper leaves these open; each choice is documented where it is made):

* A flow's samples are per-interval: ``t_s`` is the END of each interval relative to the
  flow's own start (trace contract), ``bytes`` the payload acknowledged in it. The first
  interval starts at t = 0, so interval lengths are ``diff([0, t_s])``.
* Per-interval throughput is ``8 * bytes / interval`` (bit/s); means are byte-weighted,
  i.e. ``8 * sum(bytes) / sum(interval)``, so irregular intervals are handled exactly.
* Quantiles use numpy's default linear interpolation (Hyndman-Fan type 7).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from tcpeval.condition import MSS_BYTES

# Sec. V: the authors chose lambda = 0.1 and kept Li et al.'s epsilon = 0.8.
DEFAULT_LAMBDA = 0.1
DEFAULT_EPSILON = 0.8
EFFICIENCY_QUANTILES = (0.25, 0.5, 0.75)  # Sec. III-B, efficiency: Q0.25, Q0.5, Q0.75


def interval_lengths(t_s: np.ndarray) -> np.ndarray:
    t = np.asarray(t_s, dtype=np.float64)
    return np.diff(t, prepend=0.0)


def interval_rates(t_s: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
    """Per-interval throughput in bit/s (the efficiency distribution's elements)."""
    dt = interval_lengths(t_s)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(dt > 0, 8.0 * np.asarray(nbytes, dtype=np.float64) / dt, np.nan)


def mean_throughput(t_s: np.ndarray, nbytes: np.ndarray, mask: np.ndarray | None = None) -> float:
    """Sec. III-B responsiveness: the average throughput of a flow (bit/s), optionally
    over the intervals selected by ``mask``."""
    dt = interval_lengths(t_s)
    b = np.asarray(nbytes, dtype=np.float64)
    if mask is not None:
        dt, b = dt[mask], b[mask]
    total = dt.sum()
    return float(8.0 * b.sum() / total) if total > 0 else math.nan


def throughput_quantiles(rates: np.ndarray, qs=EFFICIENCY_QUANTILES) -> np.ndarray:
    """Sec. III-B efficiency: quantiles of the per-interval throughput distribution."""
    r = np.asarray(rates, dtype=np.float64)
    r = r[np.isfinite(r)]
    if r.size == 0:
        return np.full(len(qs), np.nan)
    return np.quantile(r, qs)


def jain_index(x) -> float:
    """Sec. III-B fairness, Jain's index (sum x)^2 / (n * sum x^2) over the flows' mean
    throughputs: 1 for equal shares, 1/n when one flow takes everything. NaN if no flow
    carried anything (the index is undefined there)."""
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0 or not np.all(np.isfinite(x)):
        return math.nan
    sq = float(np.sum(x * x))
    if sq == 0:
        return math.nan
    return float(np.sum(x) ** 2 / (x.size * sq))


def short_term_throughput(rates: np.ndarray, lam: float = DEFAULT_LAMBDA, u0: float = 0.0,
                          block: int = 64) -> np.ndarray:
    """Sec. III-B convergence: u(t+d) = (1 - lam) u(t) + lam * bytes/d, one step per
    interval, starting from u = ``u0`` before the first interval (0: the flow has carried
    nothing before it starts -- our choice, the paper does not state u's initial value).

    Vectorised in blocks: inside a block of B samples u_i = r^(i+1) u_prev +
    lam * r^i * cumsum(x_m r^-m) with r = 1 - lam; only the carry between blocks is
    sequential. r^-(B-1) stays small enough (B = 64) to keep float64 precision.
    """
    if not 0 < lam <= 1:
        raise ValueError(f"lambda must lie in (0, 1], got {lam}")
    x = np.asarray(rates, dtype=np.float64)
    n = x.size
    if n == 0:
        return x.copy()
    r = 1.0 - lam
    if r == 0.0:
        return x.copy()
    nb = -(-n // block)
    padded = np.zeros(nb * block)
    padded[:n] = x
    m = padded.reshape(nb, block)
    i = np.arange(block, dtype=np.float64)
    rpow = r ** i                      # r^i
    inner = lam * rpow * np.cumsum(m / rpow, axis=1)   # contribution of the block's own samples
    decay = r ** (i + 1)               # weight of the carry-in at position i
    out = np.empty_like(m)
    carry = u0
    for b in range(nb):
        out[b] = inner[b] + decay * carry
        carry = out[b, -1]
    return out.reshape(-1)[:n]


@dataclass(frozen=True)
class Convergence:
    converged: bool
    time_s: float        # epsilon-convergence time t_c from the flow's start; NaN if never
    spread_bps: float    # mean |u_bar - u(t)| from t_c on; NaN if never converged
    ubar_bps: float      # the long-term mean u_bar the flow converges to
    # |u_bar - u(t)| from t_c on, whose mean is the spread (its interval: extract); none if never
    distances: np.ndarray = field(default_factory=lambda: np.empty(0), compare=False, repr=False)

    @property
    def n_after(self) -> int:
        """Samples the spread averages over."""
        return int(self.distances.size)


def convergence(t_s: np.ndarray, nbytes: np.ndarray, end_s: float | None = None,
                lam: float = DEFAULT_LAMBDA, eps: float = DEFAULT_EPSILON,
                u: np.ndarray | None = None) -> Convergence:
    """Sec. III-B epsilon-convergence time and spread of one flow (the NEW flow, see
    `tcpeval.analysis.extract`).

    * ``end_s`` (relative to the flow's start) ends the period both flows run; only
      intervals ending at or before it count. u_bar is the byte-weighted mean throughput of
      the flow over that period (our reading of "long-term average throughput").
    * t_c is the end of the first interval at which u(t) >= eps * u_bar ("the time required
      for the short-term average throughput to achieve eps * u_bar"; first passage, we do
      not require it to stay above).
    * spread s = sum_{t >= t_c} |u_bar - u(t)| / T with T the number of summed samples
      (the samples from t_c to the end of the period), i.e. the mean distance after
      convergence.
    * If u_bar is 0/undefined or u never reaches eps * u_bar: not converged, t_c and s NaN
      (the figures count these runs instead of dropping them silently).
    """
    if not 0 < eps <= 1:
        raise ValueError(f"epsilon must lie in (0, 1], got {eps}")
    t = np.asarray(t_s, dtype=np.float64)
    if u is None:
        u = short_term_throughput(interval_rates(t, nbytes), lam)
    mask = np.ones(t.size, dtype=bool) if end_s is None else t <= end_s + 1e-9
    ubar = mean_throughput(t, nbytes, mask)
    nan = math.nan
    if not mask.any() or not np.isfinite(ubar) or ubar <= 0:
        return Convergence(False, nan, nan, ubar)
    uu = u[mask]
    hit = np.flatnonzero(uu >= eps * ubar)
    if hit.size == 0:
        return Convergence(False, nan, nan, ubar)
    k = int(hit[0])
    distances = np.abs(ubar - uu[k:])
    return Convergence(True, float(t[mask][k]), float(np.mean(distances)), ubar, distances)


# --------------------------------------------------------------------------------------
# Further per-flow and per-run metrics (not in the paper's Sec. III-B): retransmission
# rate, recovery after a disturbance, Jain's index per grid cell and per-flow timelines.
# --------------------------------------------------------------------------------------

DEFAULT_MSS = MSS_BYTES       # the paper's segment (tcpeval.condition)
DEFAULT_RECOVERY_FRACTION = 0.9
TIME_TOL_S = 1e-9             # end times within this of a boundary count as on it
RATE_RTOL = 1e-9              # a rate within this (relative) of a level counts as reaching it


def retransmission_rate(nbytes: np.ndarray, retransmits: np.ndarray, mss: float = DEFAULT_MSS) -> float:
    """Retransmitted segments per data segment of one flow:
    ``sum(retransmits) / (sum(bytes) / mss)``.

    * ``bytes`` is the trace's per-interval payload, which is what the RECEIVER got (see
      the trace schema), so the denominator counts the distinct data segments delivered,
      i.e. the original transmissions (retransmissions are not in it, and nor is data the
      sender wrote but never got across). Studies that divide by all segments on the wire
      (e.g. Linux's ``total_retrans / segs_out``, retransmissions included) get
      ``x / (1 + x)`` for our ``x``; the two agree to first order at small rates. Passing
      ``sent_bytes`` instead would count data still sitting in the send buffer (up to
      1 GiB), so we do not.
    * Segments are ``bytes / mss`` as a real number (no rounding up per interval): every
      full segment carries ``mss`` bytes in bulk transfer, the remainder is negligible.
    * ``retransmits`` may hold NaN for intervals whose count is unknown: those intervals
      are left out of BOTH sums (the rate over the known intervals). NaN if every interval
      is unknown, if there are no intervals, or if the counted intervals carried no bytes
      ("nothing was sent": the rate is undefined).
    * The retransmit counts come from the sender's intervals and the bytes from the
      receiver's, matched by position (`tcpeval.backends.common.parse_iperf3`); over a
      whole flow the offset between the two only matters at the ends.
    """
    if not mss > 0:
        raise ValueError(f"mss must be > 0, got {mss}")
    b = np.asarray(nbytes, dtype=np.float64)
    r = np.asarray(retransmits, dtype=np.float64)
    if b.shape != r.shape:
        raise ValueError(f"bytes and retransmits differ in shape: {b.shape} vs {r.shape}")
    known = np.isfinite(r)
    if not known.any():
        return math.nan
    segments = float(b[known].sum()) / mss
    if segments <= 0:
        return math.nan
    return float(r[known].sum()) / segments


@dataclass(frozen=True)
class Recovery:
    pre_bps: float               # mean throughput before the window (last pre_s seconds if given)
    during_bps: float            # mean throughput inside the window
    post_bps: float              # mean throughput after the window, to the flow's end
    ratio: float                 # post / pre; NaN if either is undefined or pre is 0
    recovered: bool              # an interval after the window reached fraction * pre
    time_to_recover_s: float     # seconds from the window's end; NaN if not recovered
    n_pre: int                   # intervals in each part
    n_during: int
    n_post: int


def throughput_recovery(t_abs: np.ndarray, nbytes: np.ndarray, d0: float, d1: float, *,
                        start_s: float, pre_s: float | None = None,
                        fraction: float = DEFAULT_RECOVERY_FRACTION) -> Recovery:
    """How one flow's throughput recovers from a disturbance in the window [d0, d1)
    (absolute run seconds: a UDP burst, a competing flow's lifetime, ...).

    ``t_abs`` are the flow's interval END times in absolute run time (``start_s + t_s``)
    and ``start_s`` the flow's start, where its first interval begins (needed for that
    interval's length; keyword-only so it cannot be confused with d0/d1).

    * Parts: an interval belongs to the part its END time falls in, with a tolerance of
      1e-9 s (an end within 1e-9 of a boundary counts as on it): pre ``end <= d0``,
      during ``d0 < end <= d1``, post ``end > d1``. An interval ending exactly at d0
      covers time before d0, one ending at d1 time inside the window, so the parts match
      [d0, d1) in continuous time; an interval straddling a boundary goes wholly to the
      part its end is in. With ``pre_s``, pre is limited to the intervals ending in
      ``(d0 - pre_s, d0]`` (same rule and tolerance at d0 - pre_s).
    * Each part's throughput is the byte-weighted mean ``8 * sum(bytes) / sum(interval)``
      (as `mean_throughput`); NaN for a part without intervals.
    * ``ratio = post / pre``; NaN when pre or post is undefined or pre is 0.
    * Recovery uses the per-interval rates, unsmoothed (studies that smooth, e.g. with the
      paper's EWMA u(t) or a moving window of several intervals, report later, steadier
      recoveries; per-interval rates keep it free of a second parameter and match the
      interval the trace resolves). The flow has recovered at the first post interval
      whose rate is >= ``fraction * pre`` (first passage: it need not stay above, as in
      `convergence`); a rate within 1e-9 (relative) of the level counts as reaching it, so
      float noise in the interval lengths (0.8 - 0.7 != 0.1) does not decide a tie.
      ``time_to_recover_s`` is the time from d1 to the START of that
      interval (the flow already ran at the level during it), clamped at 0: 0 when the
      first post interval already reaches it (also when it straddles d1). Resolution is
      one interval.
    * Not recovered (``recovered=False``, time NaN) when no post interval reaches the
      level, when there is no post interval, or when pre is undefined or 0 (no level to
      regain).
    """
    if d1 < d0:
        raise ValueError(f"the window must not end before it starts: [{d0}, {d1})")
    if not fraction > 0:
        raise ValueError(f"fraction must be > 0, got {fraction}")
    if pre_s is not None and not pre_s > 0:
        raise ValueError(f"pre_s must be > 0, got {pre_s}")
    t = np.asarray(t_abs, dtype=np.float64)
    b = np.asarray(nbytes, dtype=np.float64)
    rel = t - float(start_s)
    tol = TIME_TOL_S
    pre = t <= d0 + tol
    if pre_s is not None:
        pre &= t > d0 - pre_s + tol
    during = (t > d0 + tol) & (t <= d1 + tol)
    post = t > d1 + tol

    def part_mean(mask):
        return mean_throughput(rel, b, mask) if mask.any() else math.nan

    pre_bps, during_bps, post_bps = part_mean(pre), part_mean(during), part_mean(post)
    ok_pre = math.isfinite(pre_bps) and pre_bps > 0
    ratio = post_bps / pre_bps if ok_pre and math.isfinite(post_bps) else math.nan
    recovered, ttr = False, math.nan
    if ok_pre and post.any():
        rates = interval_rates(rel, b)
        idx = np.flatnonzero(post)
        level = fraction * pre_bps * (1.0 - RATE_RTOL)
        hit = idx[rates[idx] >= level]   # NaN rates (zero-length intervals) never hit
        if hit.size:
            k = int(hit[0])
            begin = t[k] - interval_lengths(rel)[k]
            recovered = True
            ttr = float(begin - d1) if begin - d1 > tol else 0.0
    return Recovery(pre_bps, during_bps, post_bps, ratio, recovered, ttr,
                    int(pre.sum()), int(during.sum()), int(post.sum()))


def _grid(flows, interval_s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bin flows onto the common absolute grid of cells ((k-1) w, k w], k = 1, 2, ...:
    (cell end times, bytes per flow and cell, active per flow and cell), the last two of
    shape (n_flows, n_cells). An interval's bytes go to the cell its END time falls in
    (an end within 1e-9 s of a cell boundary counts as on it, i.e. in the earlier cell)."""
    if not interval_s > 0:
        raise ValueError(f"interval_s must be > 0, got {interval_s}")
    w = float(interval_s)
    cells, weights = [], []
    for start_s, t_s, nbytes in flows:
        t = float(start_s) + np.asarray(t_s, dtype=np.float64)
        b = np.asarray(nbytes, dtype=np.float64)
        if t.shape != b.shape:
            raise ValueError(f"t_s and bytes differ in shape: {t.shape} vs {b.shape}")
        if t.size and t.min() < -TIME_TOL_S:
            raise ValueError("interval end times before 0 (the grid starts at 0)")
        cells.append(np.maximum(np.ceil((t - TIME_TOL_S) / w).astype(np.int64) - 1, 0))
        weights.append(b)
    n_cells = max((int(c.max()) + 1 for c in cells if c.size), default=0)
    nb = np.zeros((len(cells), n_cells))
    active = np.zeros((len(cells), n_cells), dtype=bool)
    for i, (c, b) in enumerate(zip(cells, weights)):
        nb[i] = np.bincount(c, weights=b, minlength=n_cells)
        active[i, c] = True
    ends = (np.arange(n_cells, dtype=np.float64) + 1.0) * w
    return ends, nb, active


@dataclass(frozen=True, eq=False)
class CellFairness:
    t_s: np.ndarray        # absolute end of each cell with >= 2 active flows
    n_active: np.ndarray   # active flows in the cell
    jain: np.ndarray       # Jain's index of their rates; NaN where all of them carried 0
    mean: float            # time-weighted mean of the finite jain values; NaN if none
    n_used: int            # cells the mean is over


def jain_per_cell(flows, interval_s: float) -> CellFairness:
    """Jain's index over time, in the cells of a common grid where two or more flows are
    active.

    * ``flows``: a run's flows, each ``(start_s, t_s, bytes)`` with the flow's own t_s
      (interval ends relative to its start). The flows share the sampling interval but
      their start times need not be multiples of it, so their intervals are binned onto
      a common absolute grid of width ``interval_s`` (use the run's sampling interval)
      starting at 0: cells ((k-1) w, k w]. Each interval's bytes go to the cell its END
      time falls in (1e-9 s tolerance at the boundaries: an end on a boundary belongs to
      the cell it closes), as for `throughput_recovery`'s parts. A flow's rate in a cell is
      ``8 * bytes / interval_s``.
    * A flow is active in a cell if one of its intervals ends in that cell (a grid finer
      than the sampling interval would leave cells with no active flow, so do not use one).
    * For every cell with >= 2 active flows: Jain's index ``(sum x)^2 / (n sum x^2)`` of the
      active flows' rates (`jain_index`'s definition, evaluated for all cells at once);
      inactive flows do not count (an idle flow that has not started is not an unfair
      share). NaN in a cell where all active flows carried 0.
    * ``mean``: the time-weighted mean over those cells with a finite index. All cells have
      the same width, so this is their plain mean; NaN if there is no such cell (e.g. the
      flows never overlap). This is a per-interval (short-term) fairness, unlike the
      run-level ``jain`` of `extract.summarise`, which is over the flows' means over the
      common period (flows that take turns are fair on average but not per cell).
    """
    ends, nb, active = _grid(list(flows), interval_s)
    n = active.sum(axis=0)
    sel = n >= 2
    x = np.where(active, 8.0 * nb / float(interval_s), 0.0)[:, sel]
    s1 = x.sum(axis=0)
    s2 = (x * x).sum(axis=0)
    nn = n[sel]
    with np.errstate(divide="ignore", invalid="ignore"):
        jain = np.where(s2 > 0, s1 * s1 / (nn * s2), np.nan)
    finite = np.isfinite(jain)
    mean = float(jain[finite].mean()) if finite.any() else math.nan
    return CellFairness(ends[sel], nn.astype(np.int64), jain, mean, int(finite.sum()))


def throughput_timelines(flows, interval_s: float, ids=None):
    """Per-flow throughput over time on the common grid of `jain_per_cell`, long format:
    a pandas DataFrame with columns ``flow``, ``t_s`` (absolute end of the cell),
    ``throughput_bps`` (``8 * bytes / interval_s`` of the intervals ending in the cell) and
    ``active`` (an interval of the flow ends in the cell), one row per flow and cell, rows
    ordered by flow then time.

    * ``flows`` as for `jain_per_cell`; ``ids`` labels them (default 0, 1, ...).
    * The grid runs from 0 to the last cell any flow is active in, and every flow has a row
      for every cell: 0 bit/s and ``active=False`` where it is not active (before its start,
      after it stops), so stacked/area plots line up and the ``active`` rows of a cell are
      exactly the flows `jain_per_cell` compares there.
    * Rates are bytes over the cell width, so a flow's rows integrate to its bytes
      (``sum(throughput_bps) * interval_s / 8``); a shorter last interval shows as a lower
      rate in its cell.
    """
    import pandas as pd

    flows = list(flows)
    ids = list(range(len(flows))) if ids is None else list(ids)
    if len(ids) != len(flows):
        raise ValueError(f"{len(ids)} ids for {len(flows)} flows")
    ends, nb, active = _grid(flows, interval_s)
    n_f, n_c = nb.shape
    return pd.DataFrame({
        "flow": np.repeat(np.asarray(ids), n_c),
        "t_s": np.tile(ends, n_f),
        "throughput_bps": (8.0 * nb / float(interval_s)).reshape(-1),
        "active": active.reshape(-1),
    }, columns=["flow", "t_s", "throughput_bps", "active"])


# RPC latencies (beyond the paper: request/response flows). Percentiles are nearest-rank
# (the smallest latency that at least p of the RPCs did not exceed; numpy's
# "inverted_cdf"), as latency reports state them: every figure is an RPC that happened.
RPC_PERCENTILES = (0.5, 0.9, 0.99, 0.999)
# The probabilities a flow's latency CDF is kept at (the tidy flows table): a fine grid
# for the body, the tail points the percentiles name.
RPC_CDF_PROBS = tuple(round(i / 100, 2) for i in range(100)) + (0.995, 0.999, 0.9995, 1.0)


def rpc_latency_summary(latency_us) -> dict:
    """count, min, mean, max and the RPC_PERCENTILES (p50, p90, p99, p999) of one flow's
    RPC latencies (microseconds); NaN where there are none."""
    x = np.sort(np.asarray(latency_us, dtype=np.float64))
    out = {"count": int(x.size)}
    if not x.size:
        return out | {k: math.nan for k in ("min", "mean", "max", *(_pname(p) for p in RPC_PERCENTILES))}
    out |= {"min": float(x[0]), "mean": float(x.mean()), "max": float(x[-1])}
    for p in RPC_PERCENTILES:
        out[_pname(p)] = nearest_rank(x, p)
    return out


def nearest_rank(sorted_x: np.ndarray, p: float) -> float:
    """The p-quantile by nearest rank: x[ceil(p * n) - 1] (the minimum for p = 0)."""
    n = sorted_x.size
    return float(sorted_x[max(0, math.ceil(round(p * n, 9)) - 1)])


def rpc_latency_cdf(latency_us, probs=RPC_CDF_PROBS) -> list[float]:
    """The latencies at ``probs`` (nearest rank): a flow's CDF in a few hundred numbers."""
    x = np.sort(np.asarray(latency_us, dtype=np.float64))
    return [nearest_rank(x, p) for p in probs] if x.size else []


def _pname(p: float) -> str:
    """0.5 -> p50, 0.999 -> p999."""
    return "p" + f"{p * 100:g}".replace(".", "")
