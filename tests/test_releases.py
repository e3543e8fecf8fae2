"""A release nobody states is the one current on the run's date: a published measurement's source date, today for a
script (estimator/releases.py)."""

from __future__ import annotations

import datetime

from trainlint.estimator.releases import current_on, dated_settings, releases_assumed, source_date


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
