"""Metrics of the paper (Sec. III-B) and tidy Parquet tables; never imports tcpeval.backends.

Choices the paper leaves open (documented where made, and in the manuscript's Method):
  * per-interval throughput 8*bytes/interval; means are byte-weighted over time;
  * efficiency quantiles: numpy linear (type 7), over all intervals incl. slow start;
  * two-flow means (Jain, utilisation) cover the period all flows run;
  * convergence: the later-starting flow; u(0) = 0; u_bar = its mean while both run;
    t_c = end of the first interval with u >= eps * u_bar (first passage);
    spread = mean |u_bar - u| over the intervals from t_c to the end of that period;
    never reaching the threshold -> converged False, t_c and spread NaN, counted.
Modules: metrics (pure functions), extract (trace -> rows), tidy (Parquet, gather),
tables (aggregates, expected matrix, flagged/missing accounting), synthetic (test traces).
"""
