#!/usr/bin/env python3
"""tools/gpu/ncu_summary.py on a small ncu raw-page export: sums by kernel, unit scaling, the rate
and the time against the bytes' floor. Run by ctest (tools_ncu_summary)."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools", "gpu"))
import ncu_summary  # noqa: E402

EXPORT = '''"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Grid Size","dram__bytes_read.sum","dram__bytes_write.sum","gpu__time_duration.sum"
"","","","","","","","","Mbyte","Kbyte","usecond"
"0","1","deepinfer","h","void deepinfer::cuda::(anonymous namespace)::moe_stream_kernel<5, true, 2>(const DevMatrix *)","1","7","(4, 1, 1)","50","0","47"
"1","1","deepinfer","h","void deepinfer::cuda::(anonymous namespace)::rms_norm_kernel(float *)","1","7","(1, 1, 1)","0.5","500","5"
"2","1","deepinfer","h","void deepinfer::cuda::(anonymous namespace)::moe_stream_kernel<5, true, 2>(const DevMatrix *)","1","7","(8, 1, 1)","50","0","53"
'''


def main():
    with tempfile.NamedTemporaryFile("w", suffix=f".{os.getpid()}.csv", delete=False) as f:
        f.write(EXPORT)
        path = f.name
    try:
        text = ncu_summary.summarize(path, "test", 4.0)
    finally:
        os.unlink(path)
    print(text)
    lines = text.splitlines()
    # 47 + 5 + 53 us; 100 MB + 0.5 MB + 0.5 MB of DRAM traffic.
    assert lines[0].startswith("test: 0.10 ms of kernels, 3 launches, 0.101 GB"), lines[0]
    moe = next(l for l in lines if "moe_stream_kernel<5, true, 2>" in l)
    cells = [c.strip() for c in moe.strip("|").split("|")]
    # 100 us, 2 launches, 100 MB, 1.00 TB/s, floor 100 MB / 4 TB/s = 25 us: 4.0x.
    assert cells[2:] == ["0.100", "2", "100.0", "1.00", "4.0"], cells
    assert "void " not in moe and "anonymous namespace" not in moe, moe
    norm = next(l for l in lines if "rms_norm_kernel" in l)
    cells = [c.strip() for c in norm.strip("|").split("|")]
    assert cells[2:] == ["0.005", "1", "1.0", "0.20", "20.0"], cells  # 1 MB in 5 us; floor 0.25 us
    # --by-grid: the two grids of the same kernel on rows of their own.
    with tempfile.NamedTemporaryFile("w", suffix=f".{os.getpid()}.csv", delete=False) as f:
        f.write(EXPORT)
        path = f.name
    try:
        by_grid = ncu_summary.summarize(path, "test", 4.0, by_grid=True).splitlines()
    finally:
        os.unlink(path)
    small = next(l for l in by_grid if "moe_stream_kernel<5, true, 2> grid (4, 1, 1)" in l)
    assert [c.strip() for c in small.strip("|").split("|")][2:4] == ["0.047", "1"], small
    assert any("grid (8, 1, 1)" in l for l in by_grid), by_grid
    # Newer ncu releases abbreviate the units (ns, B, MB) and group digits with commas: same sums.
    short = (EXPORT.replace('"Mbyte","Kbyte","usecond"', '"B","KB","ns"').replace('"50","0","47"', '"50,000,000","0","47,000"')
             .replace('"0.5","500","5"', '"500,000","500","5,000"').replace('"50","0","53"', '"50,000,000","0","53,000"'))
    with tempfile.NamedTemporaryFile("w", suffix=f".{os.getpid()}.csv", delete=False) as f:
        f.write(short)
        path = f.name
    try:
        assert ncu_summary.summarize(path, "test", 4.0) == text
    finally:
        os.unlink(path)
    # An unknown unit is an error, not a silent misreading.
    bad = EXPORT.replace('"usecond"', '"furlong"')
    with tempfile.NamedTemporaryFile("w", suffix=f".{os.getpid()}.csv", delete=False) as f:
        f.write(bad)
        path = f.name
    try:
        ncu_summary.summarize(path, "test", 4.0)
        raise AssertionError("an unknown unit was accepted")
    except SystemExit as e:
        assert "furlong" in str(e), e
    finally:
        os.unlink(path)
    print("ok")


if __name__ == "__main__":
    main()
