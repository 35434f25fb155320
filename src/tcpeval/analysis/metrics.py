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
from dataclasses import dataclass

import numpy as np

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
    n_after: int         # samples the spread averages over


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
        return Convergence(False, nan, nan, ubar, 0)
    uu = u[mask]
    hit = np.flatnonzero(uu >= eps * ubar)
    if hit.size == 0:
        return Convergence(False, nan, nan, ubar, 0)
    k = int(hit[0])
    after = uu[k:]
    return Convergence(True, float(t[mask][k]), float(np.mean(np.abs(ubar - after))), ubar, int(after.size))
