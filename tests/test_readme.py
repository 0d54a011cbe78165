"""The README stays true: it lists every setting with its default, as the code defines them."""

import pathlib
import re

from app.config import SETTINGS, settings_table

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_readme_settings_table_matches_the_code():
    readme = (ROOT / "README.md").read_text()
    block = readme.split("<!-- settings:start -->")[1].split("<!-- settings:end -->")[0]
    assert block.strip() == settings_table().strip(), "run: flask --app wsgi settings --readme"


def test_every_environment_variable_read_is_a_documented_setting():
    names = {f"QUARRY_{s.name}" for s in SETTINGS}
    used = set()
    for path in [*ROOT.joinpath("app").rglob("*.py"), ROOT / "gunicorn.conf.py"]:
        used |= set(re.findall(r"QUARRY_[A-Z_]+[A-Z]", path.read_text()))
    assert used <= names, used - names


def test_the_readme_sends_readers_to_the_address_quarry_serves():
    # The console's address once pointed at port 8000, where nothing listens: it must be
    # the address gunicorn binds by default (`make serve`).
    (bind,) = [s.default for s in SETTINGS if s.name == "BIND"]
    readme = (ROOT / "README.md").read_text()
    console = re.search(r"serves a web console at <(http://[^>]+)>", readme)
    assert console and console.group(1) == f"http://{bind}/"
