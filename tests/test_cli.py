import subprocess
import sys

from kimitui import __version__
from kimitui.cli import main


def test_version_flag_prints_version():
    out = subprocess.run([sys.executable, "-m", "kimitui", "--version"], capture_output=True, text=True)
    assert out.returncode == 0
    assert out.stdout.strip() == f"kimitui {__version__}"


def test_help_lists_options(capsys):
    try:
        main(["--help"])
    except SystemExit as exc:
        assert exc.code == 0
    assert "--config" in capsys.readouterr().out
