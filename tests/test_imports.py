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


def test_the_server_extension_loads_without_the_engines_dependencies():
    """A JupyterLab environment may hold nbmemory without its engine (the wheel test installs
    it with --no-deps): its server extension must still load. Importing the stemmer at the
    tokenizer's import broke it."""
    out = run("""
        import sys
        for engine_only in ("Stemmer", "snowballstemmer", "torch", "sentence_transformers",
                            "usearch", "duckdb"):
            sys.modules[engine_only] = None  # import fails, as where it is not installed
        import nbmemory.server, nbmemory.server.app, nbmemory.anchors
        print("loaded")
    """)
    assert out == "loaded"
