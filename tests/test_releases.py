"""A release nobody states is the one current on the run's date: a published measurement's source date, today for a
script (estimator/releases.py)."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pytest

from trainlint.estimator.releases import current_on, dated_settings, latest_day, releases_assumed, source_date

PUBLISHED = Path(__file__).resolve().parent.parent / "estimator" / "calibration" / "published_peaks.json"


def test_a_source_date_is_a_day_or_the_first_day_of_its_month_or_year():
    assert source_date("2024-06-11") == datetime.date(2024, 6, 11)
    assert source_date("2023-03") == datetime.date(2023, 3, 1)
    assert source_date("2025") == datetime.date(2025, 1, 1)


def test_the_current_release_is_the_newest_published_by_that_day():
    # PyPI: transformers 4.44.2 on 2024-08-22, 4.45.0 on 2024-09-25; bitsandbytes 0.43.1 on 2024-04-11, 0.43.2 on 2024-07-23
    assert current_on(datetime.date(2024, 9, 24))["transformers"] == "4.44.2"
    assert current_on(datetime.date(2024, 9, 25))["transformers"] == "4.45.0"
    assert current_on(datetime.date(2024, 7, 22))["bitsandbytes"] == "0.43.1"
    assert "peft" not in current_on(datetime.date(2022, 12, 31))  # its first release came in January 2023


def test_a_dated_source_runs_the_release_of_its_date():
    # the Qwen2 speed benchmark's page (June 2024): transformers before 4.45 kept the per-layer rotary caches, computed
    # the whole prompt's logits and copied the cache between steps
    june = dated_settings({}, datetime.date(2024, 6, 11), "qwen2")
    assert june["rotary_cache"] and june["prompt_logits_whole"] and june["cache_copied"]
    november = dated_settings({}, datetime.date(2024, 11, 6), "qwen2")
    assert not november["rotary_cache"] and not november["prompt_logits_whole"] and not november["cache_copied"]


def test_a_stated_release_wins_over_the_date():
    assert releases_assumed({"bitsandbytes": "0.41.1"}, datetime.date(2025, 1, 1))["bitsandbytes"] == "0.41.1"
    assert dated_settings({"bitsandbytes": "0.41.1"}, datetime.date(2025, 1, 1), None)["quant_keeps_inputs"] is True
    assert dated_settings({}, datetime.date(2025, 1, 1), None)["quant_keeps_inputs"] is False


def test_every_dated_source_states_a_day_that_parses_and_no_release_the_estimator_does_not_follow():
    rows = json.loads(PUBLISHED.read_text(encoding="utf-8"))["rows"]
    by_url: dict[str, tuple] = {}
    for row in rows:
        source = row["source"]
        if "date" in source:
            assert source_date(source["date"]) <= latest_day()
        by_url.setdefault(source["url"], (source.get("date"), source.get("releases")))
        assert by_url[source["url"]] == (source.get("date"), source.get("releases")), "one source, one date"
    assert sum(date is not None for date, _ in by_url.values()) >= len(by_url) - 1


def test_a_row_states_what_wins_over_its_sources_date():
    from trainlint.estimator import accuracy

    source = {"url": "https://example.org/page", "date": "2023-06-01"}
    assert accuracy._source_release_settings(source, None)["quant_keeps_inputs"] is True  # bitsandbytes 0.39
    assert accuracy._source_release_settings({"url": source["url"]}, None) == {}  # undated: today's, unstated
    stated = accuracy._source_release_settings({**source, "releases": {"bitsandbytes": "0.45.0"}}, None)
    assert stated["quant_keeps_inputs"] is False


@pytest.mark.parametrize("flags", [[], ["--library-version", "transformers=4.44.2"]])
def test_the_cli_names_the_releases_it_assumed_today(capsys, flags):
    from trainlint.cli import main

    main(["estimate", "--model", "llama-3.1-8b", "--gpu", "a100-80gb", "--format", "json", *flags])
    inputs = json.loads(capsys.readouterr().out)["inputs"]
    releases = inputs["library releases"]
    assert releases["source"].startswith("assumed: the current ones")
    latest = current_on(max(latest_day(), datetime.date.today()))
    assert f"torch {latest['torch']}" in releases["value"]
    if flags:
        assert "transformers" not in releases["value"] and inputs["transformers version"]["value"] == "4.44.2"
    else:
        assert f"transformers {latest['transformers']}" in releases["value"]
