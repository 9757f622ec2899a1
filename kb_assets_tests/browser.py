"""A real headless Chromium for the tests that look at pages (the web page, the Dagster UI) and write the
README's screenshots to docs/. Needs Debian's chromium and chromium-driver (`make test` installs them when root)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def ensure_chromium() -> None:
    if os.path.exists(CHROMIUM) and os.path.exists(DRIVER):
        return
    pytest.skip("needs Debian's chromium and chromium-driver (`make test` installs them when root)")


def save_screenshot(browser, name: str) -> None:
    """The README's screenshot ``docs/NAME``, rewritten only when the page looks different (not for the
    few pixels that change between runs, such as the search time, which would leave the checkout changed after
    every run)."""
    import io

    from PIL import Image, ImageChops

    DOCS.mkdir(exist_ok=True)
    fresh = Image.open(io.BytesIO(browser.get_screenshot_as_png())).convert("RGB")
    target = DOCS / name
    if target.exists():
        stored = Image.open(target).convert("RGB")
        if stored.size == fresh.size:
            changed = ImageChops.difference(stored, fresh).convert("L").point(lambda v: 255 if v > 32 else 0)
            if sum(changed.histogram()[255:]) < 0.01 * fresh.size[0] * fresh.size[1]:
                return
    fresh.save(target)


def cjk_fontconfig(folder: Path) -> Path:
    """A fontconfig file naming only the Noto Sans SC of the dev extra's pylopdf-fonts-zh-cn wheel."""
    import pylopdf_fonts_zh_cn

    fonts = Path(pylopdf_fonts_zh_cn.__file__).parent
    config = folder / "fonts.conf"
    config.write_text(
        f"""<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "fonts.dtd">
<fontconfig>
  <dir>{fonts}</dir>
  <cachedir>{folder / "cache"}</cachedir>
  <alias><family>sans-serif</family><prefer><family>Noto Sans SC</family></prefer></alias>
  <alias><family>system-ui</family><prefer><family>Noto Sans SC</family></prefer></alias>
</fontconfig>
""",
        encoding="utf-8",
    )
    return config


@contextmanager
def chromium(folder: Path, window: str = "1280,900") -> Iterator:
    """A headless Chromium (selenium), its profile under ``folder``, Chinese fonts from the dev extra."""
    ensure_chromium()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in [*FLAGS, f"--window-size={window}", f"--user-data-dir={folder / 'profile'}"]:
        options.add_argument(flag)
    env = dict(os.environ, FONTCONFIG_FILE=str(cjk_fontconfig(folder)))
    driver = webdriver.Chrome(service=Service(DRIVER, env=env), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def wait(driver, condition, timeout=90):
    """``condition``'s first truthy answer; an element the page drew again while it was read is read again."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(
        driver, timeout, poll_frequency=0.2, ignored_exceptions=(StaleElementReferenceException,)
    ).until(condition)
