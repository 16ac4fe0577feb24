"""Startup cost: importing nbmemory and loading the extension stay light."""

import subprocess
import sys
import textwrap

HEAVY = ["torch", "sentence_transformers", "jupyter_server", "tornado", "duckdb", "usearch",
         "transformers", "pandas"]


def run(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_import_and_load_ext_import_nothing_heavy():
    out = run(f"""
        import sys
        from IPython.testing.globalipapp import start_ipython
        ip = start_ipython()
        import nbmemory
        ip.run_line_magic("load_ext", "nbmemory")
        print(",".join(m for m in {HEAVY!r} if m in sys.modules))
    """)
    assert out == ""
