"""The performance dashboard in a real browser: a history of real suite runs with one planted
regression, written by `neuron-sim report`, opened from disk by headless Chromium (Debian's
package, installed by scripts/setup.sh). The plots must render with no console error, the
planted regression must be the one row and the one point marked, and the screenshot must show
drawn plots (saved beside the site as screenshot.png)."""

from __future__ import annotations

import csv
import io
import pathlib
import subprocess

import pytest

from headless_chromium import HeadlessChromium, find_chromium, nonblank_fraction

ROOT = pathlib.Path(__file__).resolve().parents[3]
NEURON_SIM = ROOT / "build" / "bin" / "neuron-sim"
REGRESSED = ("trn2/neff/matmul_bf16", "total_time_ns")

pytestmark = pytest.mark.skipif(
    not NEURON_SIM.exists(), reason="the CLI is built by the C++ build (scripts/test.sh)"
)


def neuron_sim(*args: str) -> str:
    done = subprocess.run(
        [str(NEURON_SIM), *args], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> pathlib.Path:
    """Three runs of the suite's fast benchmarks (c1, c2: real; c3: c2's figures with the
    matmul NEFF 30 % slower), and the report of that history."""
    tmp = tmp_path_factory.mktemp("dashboard")
    db, figures = tmp / "history.db", tmp / "run.csv"
    for commit in ("c1", "c2"):
        neuron_sim(
            "bench", "--suite", "bench/suite.json", "--skip-label", "torch", "--record", str(db),
            "--commit", commit, "--csv", str(figures), "--machine", "test",
        )  # fmt: skip
    rows = list(csv.reader(io.StringIO(figures.read_text())))
    planted = [r for r in rows if (r[0], r[1]) == REGRESSED]
    assert len(planted) == 1, "the suite has no matmul NEFF run"
    planted[0][2] = repr(float(planted[0][2]) * 1.3)
    with open(figures, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)
    neuron_sim("bench", "--import", str(figures), "--record", str(db), "--commit", "c3")
    out = neuron_sim("report", str(db), "-o", str(tmp / "site"))
    assert "3 runs" in out and "1 regressions" in out, out
    return tmp / "site"


@pytest.fixture(scope="module")
def browser():
    executable = find_chromium()
    assert executable, "headless Chromium is missing: scripts/setup.sh installs Debian's chromium"
    with HeadlessChromium(executable, width=1400, height=1800) as b:
        yield b


RENDERED = "document.body.dataset.rendered !== undefined"


def test_the_front_page_draws_every_plot_and_marks_the_planted_regression(site, browser):
    page = browser.open((site / "index.html").as_uri(), ready=RENDERED)
    assert page.errors == []
    # One plot: the planted figure is the only one that moved, so the suite's two real runs
    # (c1, c2) gave identical simulated values, all 776 of them.
    canvases = page.evaluate("document.querySelectorAll('canvas').length")
    assert canvases == 1
    assert page.evaluate("Number(document.body.dataset.rendered)") == canvases
    assert page.evaluate("Object.keys(Chart.instances).length") == canvases
    # Exactly one row is marked, the planted one; the first plot is its figure, with the
    # regression on its last point only.
    for table in ("#overview", "#figures"):
        marked = page.evaluate(
            f"[...document.querySelectorAll('{table} tr:is(.regression, .improvement, .change)')]"
            ".map(r => [r.className, r.dataset.benchmark, r.dataset.metric])"
        )
        assert marked == [["regression", *REGRESSED]], table
    first = page.evaluate("JSON.parse(document.getElementById('charts').textContent)[0]")
    assert (first["benchmark"], first["metric"]) == REGRESSED
    assert first["status"] == ["", "", "regression"]
    assert first["labels"] == ["c1", "c2", "c3"]

    # The screenshot shows the plots drawn: ink inside every plot's canvas, and the
    # regression's red marker in the first one.
    png = page.screenshot(site / "screenshot.png")
    boxes = page.evaluate(
        "[...document.querySelectorAll('canvas')].map(c => { const r = c.getBoundingClientRect();"
        " return [r.left + scrollX, r.top + scrollY, r.right + scrollX, r.bottom + scrollY]"
        ".map(Math.round); })"
    )
    for box in boxes:
        assert nonblank_fraction(png, tuple(box)) > 0.01, box
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB").crop(tuple(boxes[0]))
    reds = sum(n for n, (r, g, b) in image.getcolors(1 << 20) if r > 170 and g < 80 and b < 80)
    assert reds > 20, "no red regression marker drawn in the first plot"


def test_drill_down_from_a_benchmark_to_its_run_and_trace(site, browser):
    bench = browser.open((site / "benchmarks" / "trn2--neff--matmul_bf16.html").as_uri(), RENDERED)
    assert bench.errors == []
    assert bench.evaluate("Number(document.body.dataset.rendered)") >= 20  # one per metric
    run = browser.open((site / "runs" / "2.html").as_uri(), ready=RENDERED)
    assert run.errors == []
    trace = run.evaluate(
        "[...document.querySelectorAll('#artifacts a')].map(a => a.getAttribute('href'))"
        ".find(h => h.includes('matmul_bf16'))"
    )
    assert trace == "../artifacts/2/trn2--neff--matmul_bf16/trace.json"
    assert (site / "runs" / trace).resolve().read_text().lstrip().startswith("{")
