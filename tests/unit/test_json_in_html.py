"""JSON that goes into a page can hold any text: random strings made of the pieces that end or
re-open a <script> element, a comment or a JavaScript line come back equal from the JSON, and the
JSON text holds none of the characters an HTML parser (or old JavaScript) acts on."""

import json
import random

from nbprof.timeline.html_text import json_in_html

PIECES = ["<", ">", "&", "/", "!--", "-->", "script", "SCRIPT", "</", "<!--", "]]>", "\u2028",
          "\u2029", "\\", '"', "'", "\t", "\n", "é", "😀", "\x00", "amp;", "#x3c;", " "]


def test_any_string_survives_and_nothing_in_the_json_text_is_markup():
    chance = random.Random(20261204)
    for _ in range(2000):
        text = "".join(chance.choice(PIECES) for _ in range(chance.randrange(1, 12)))
        value = {text: [text, {"name": text, "n": chance.randrange(-5, 5), "x": 1.5}]}
        encoded = json_in_html(value)
        assert json.loads(encoded) == value
        assert not set(encoded) & {"<", ">", "&", "\u2028", "\u2029"}, encoded
