"""Usage records (providers/base.Usage): what a provider reports besides the counts."""

from term2acp.providers.base import Usage


def test_a_usage_names_the_billed_model_without_a_warning(caplog):
    with caplog.at_level("WARNING"):
        plain, billed = Usage(input_tokens=3), Usage(input_tokens=3, model="gpt-5-mini")
    assert (plain.model, billed.model) == (None, "gpt-5-mini")
    assert not [r for r in caplog.records if "not a count" in r.getMessage()]
