"""Ingest: sniff a file's format, parse it into canonical runs. Pure: no database access."""

from advisor.ingest.base import Input, Parser, ParserBase
from advisor.ingest.registry import detect, get_parser, parse, parsers

__all__ = ["Input", "Parser", "ParserBase", "detect", "get_parser", "parse", "parsers"]
