import ast
from codec_kit import b64, unb64, unhex, rot13


def test_round_trip():
    assert unb64(b64("hello")) == "hello"


def test_hex():
    assert unhex("68656c6c6f") == "hello"


def test_rot13_literal_eval():
    assert ast.literal_eval(rot13("'uryyb'")) == "hello"
