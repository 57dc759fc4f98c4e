"""The GPU figures of a stretch (issue 29): each GPU's mean inside against the span before, said one way.

The headline used to give the lowest to the highest single reading over the stretch ("8–72 %"), so one busy
sample at an edge stretched the range; the detail gave per-GPU means.  Both now read :func:`gpu_figures`.
"""

from __future__ import annotations

from kimitui.analysis.causes.gpu_figures import gpu_figures, gpu_words, moment_of
from kimitui.analysis.causes.timeline import CauseTimeline
from kimitui.events import GpuReading, GpuSample


def _moments(util_at, start: float = 0.0, end: float = 20.0, step: float = 0.5):
    out, t = [], start
    while t <= end:
        out.append(moment_of([GpuReading(index=i, util_pct=util_at(t, i)) for i in range(8)], t))
        t += step
    return out


def test_per_gpu_means_against_the_span_before_not_the_extreme_readings() -> None:
    # busy 49–54 %, 8 % from 10 s to 14 s; one edge sample at 10.0 still busy on GPU 0 (72 %)
    def util(t: float, i: int) -> float:
        if t == 10.0 and i == 0:
            return 72.0
        return 8.0 if 10.0 <= t <= 14.0 else 49.0 + i % 6
    fig = gpu_figures(_moments(util), 10.0, 14.0)
    assert fig is not None and fig.samples == 9 and round(fig.inside[0]) == 15 and round(fig.inside[1]) == 8
    assert gpu_words(fig) == "all 8 GPUs fell from 49–54 % to 8–15 % utilisation"  # never "8–72 %"


def test_one_gpu_that_fell_is_named_and_a_stretch_shorter_than_a_sample_reads_the_one_covering_it() -> None:
    fig = gpu_figures(_moments(lambda t, i: 12.0 if i == 3 and 10.0 <= t <= 14.0 else 90.0), 10.0, 14.0)
    assert gpu_words(fig) == "GPU 3 fell from 90 % to 12 % utilisation, the others at 90 %"
    short = gpu_figures(_moments(lambda t, i: 5.0 if 10.0 < t <= 10.5 else 60.0), 10.1, 10.2)
    assert short is not None and short.samples == 1 and gpu_words(short) == "all 8 GPUs fell from 60 % to 5 % utilisation"
    assert gpu_figures(_moments(lambda t, i: 50.0, end=5.0), 30.0, 31.0) is None  # nothing covers it
    steady = gpu_figures(_moments(lambda t, i: 90.0 + i % 4), 10.0, 14.0)
    assert gpu_words(steady) == "all 8 GPUs stayed at 90–93 % utilisation"


def test_the_timeline_places_samples_on_the_hosts_clock() -> None:
    """A sample arriving 0.6 s late (``t``) but read in the stretch (``host_t``) counts in it, and one read
    just before it does not, however it arrives."""
    tl = CauseTimeline()
    for k in range(40):
        host_t = k * 0.5
        util = 8.0 if 10.0 <= host_t <= 14.0 else 50.0
        tl.add(GpuSample(host="h", t=host_t + 0.6, host_t=host_t, seq=k,
                         gpus=[GpuReading(index=i, util_pct=util) for i in range(8)]))
    assert tl.gpu_note(10.0, 14.0) == "all 8 GPUs fell from 50 % to 8 % utilisation"
