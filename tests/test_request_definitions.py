"""requiredSchema, reasoning and providerTools are checked at start-up, naming file and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from weft.definitions import DefinitionError, Definitions, load_directory

STRICT = (
    "requiredSchema:\n"
    "  type: object\n"
    "  additionalProperties: false\n"
    "  required: [city, days]\n"
    "  properties:\n"
    "    city: {type: string}\n"
    "    days:\n"
    "      type: array\n"
    "      items:\n"
    "        type: object\n"
    "        additionalProperties: false\n"
    "        required: [celsius]\n"
    "        properties: {celsius: {type: number}}\n"
)
PROMPT = "toolDescription: d\nmodel: m\nprompt: hi\n"
VALID = {
    "models/m.yaml": "provider: scripted\nmodel: x\n",
    "prompts/p.yaml": PROMPT,
    "agents/a.yaml": "sideA:\n  prompt: p\n",
}


def _validate(root: Path, files: dict[str, str]) -> Definitions:
    for name, text in {**VALID, **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    definitions = load_directory(root)
    definitions.validate(providers=["scripted"])
    return definitions


def test_strict_schema_and_known_reasoning_pass(tmp_path: Path) -> None:
    """A strict schema, a reasoning object of known keys and object provider tools load."""
    definitions = _validate(
        tmp_path,
        {
            "prompts/p.yaml": PROMPT + STRICT + "reasoning: {effort: high}\n",
            "models/m.yaml": (
                "provider: scripted\nmodel: x\nproviderTools: [{type: web_search}]\n"
                "capabilities: {supportsJsonMode: true, reasoningLevels: [low, high]}\n"
            ),
        },
    )
    assert definitions.prompts["p"].reasoning == {"effort": "high"}
    assert definitions.models["m"].provider_tools == [{"type": "web_search"}]


@pytest.mark.parametrize(
    ("files", "fragment"),
    [
        (
            {"prompts/p.yaml": PROMPT + "requiredSchema: {type: array, items: {type: string}}\n"},
            'prompts/p.yaml: requiredSchema: must be an object schema ("type": "object")',
        ),
        (
            {"prompts/p.yaml": PROMPT + "requiredSchema: {type: object, properties: {}}\n"},
            "prompts/p.yaml: requiredSchema: is an object schema without "
            "`additionalProperties: false`",
        ),
        (
            {
                "prompts/p.yaml": PROMPT
                + STRICT.replace("        additionalProperties: false\n", "")
            },
            "prompts/p.yaml: requiredSchema.properties.days.items: is an object schema without",
        ),
        (
            {
                "prompts/p.yaml": PROMPT
                + "requiredSchema: {type: object, additionalProperties: false, "
                "properties: {a: {type: 12}}}\n"
            },
            "prompts/p.yaml: requiredSchema: is not a valid JSON Schema at properties/a/type",
        ),
        (
            {
                "prompts/p.yaml": PROMPT + STRICT,
                "models/m.yaml": "provider: scripted\nmodel: x\nfallbacks: [n]\n",
                "models/n.yaml": (
                    "provider: scripted\nmodel: y\ncapabilities: {supportsJsonMode: false}\n"
                ),
            },
            "prompts/p.yaml: requiredSchema: model 'n' (models/n.yaml) declares "
            "capabilities.supportsJsonMode: false",
        ),
        (
            {"prompts/p.yaml": PROMPT + "reasoning: {effort: high, summary: auto}\n"},
            "prompts/p.yaml: reasoning: field 'summary': Extra inputs are not permitted",
        ),
        (
            {"prompts/p.yaml": PROMPT + "reasoning: {maxTokens: 2000, budgetTokens: 2000}\n"},
            "give maxTokens or budgetTokens, not both",
        ),
        (
            {
                "prompts/p.yaml": PROMPT + "reasoning: {effort: medium}\n",
                "models/m.yaml": (
                    "provider: scripted\nmodel: x\ncapabilities: {reasoningLevels: [low, high]}\n"
                ),
            },
            "prompts/p.yaml: reasoning.effort: 'medium' is not one of the reasoning levels of "
            "model 'm' (models/m.yaml): low, high",
        ),
        (
            {"models/m.yaml": "provider: scripted\nmodel: x\nproviderTools: [web_search]\n"},
            "models/m.yaml: providerTools[0]: must be an object",
        ),
    ],
)
def test_bad_request_fields_name_file_and_field(
    tmp_path: Path, files: dict[str, str], fragment: str
) -> None:
    """Each bad requiredSchema, reasoning or providerTools is refused naming file and field."""
    with pytest.raises(DefinitionError) as caught:
        _validate(tmp_path, files)
    assert fragment in str(caught.value)


def test_effort_outside_known_levels_is_named(tmp_path: Path) -> None:
    """An unknown effort lists the efforts weft knows."""
    with pytest.raises(DefinitionError) as caught:
        _validate(tmp_path, {"prompts/p.yaml": PROMPT + "reasoning: {effort: extreme}\n"})
    assert "effort 'extreme' is not one of none, minimal, low, medium, high, xhigh" in str(
        caught.value
    )
