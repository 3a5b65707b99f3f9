"""users_from_csv reads files as spreadsheets write them: any of the usual
delimiters (found from the header), a UTF-8 BOM, Excel's ``sep=;`` first
line, CRLF endings; every problem names the file's line."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from helpers.phones import mobiles
from hypothesis import given, settings
from hypothesis import strategies as st

from campaignkit import User, ValidationError, users_from_csv
from campaignkit._input.csv_files import (
    FORMULA_STARTS,
    as_written,
    sniff_delimiter,
    spreadsheet_cell,
)
from campaignkit._input.phones import country_code_hint
from campaignkit.bulk import InvalidInput

pytestmark = pytest.mark.timeout(60)

DELIMITERS = [",", ";", "\t", "|"]


# Values as people type them, delimiters and quotes included; no line breaks
# (a quoted line break makes one record two lines: tested apart).
values = st.text(
    st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\u2028\u2029\x85"),
    max_size=12,
)
Expected = tuple[str, str, dict[str, str]]
names = st.lists(st.from_regex(r"[a-z][a-z_]{0,8}", fullmatch=True), unique=True, max_size=3)


@st.composite
def spreadsheets(draw: st.DrawFn) -> tuple[bytes, list[Expected | None]]:
    """A users file as a spreadsheet could write it, and the users it holds
    (None for a row whose country code has a space after its '+'; one
    written without its '+', as the service's upload template writes it, is
    read as that code)."""
    delimiter = draw(st.sampled_from(DELIMITERS))
    extra = [n for n in draw(names) if n not in ("country_code", "cellphone", "deployment_eta")]
    header = draw(st.permutations(["country_code", "cellphone", *extra]))
    rows = draw(
        st.lists(
            st.tuples(mobiles(), st.lists(values, min_size=3, max_size=3)),
            min_size=1,
            max_size=8,
        )
    )
    broken = draw(st.sets(st.integers(0, len(rows) - 1)))
    bare = draw(st.sets(st.integers(0, len(rows) - 1)))
    text = io.StringIO(newline="")
    sep_line = draw(st.booleans())
    if sep_line:
        text.write(f"sep={delimiter}\r\n")
    writer = csv.writer(
        text, delimiter=delimiter, lineterminator=draw(st.sampled_from(["\n", "\r\n"]))
    )
    writer.writerow(header)
    expected: list[Expected | None] = []
    for i, ((_, code, phone), extra_values) in enumerate(rows):
        written = "+ " + code[1:] if i in broken else code[1:] if i in bare else code
        fields = {
            "country_code": written,
            "cellphone": phone,
            **dict(zip(extra, extra_values, strict=False)),
        }
        writer.writerow([fields[name] for name in header])
        keys = {name: fields[name] for name in header if name in extra}
        expected.append(None if i in broken else (code, phone, keys))
    bom = b"\xef\xbb\xbf" if draw(st.booleans()) else b""
    return bom + text.getvalue().encode(), expected


@settings(max_examples=150, deadline=None)
@given(spreadsheets())
def test_any_spreadsheet_file_reads_back_its_users_with_their_lines(
    tmp_path_factory: pytest.TempPathFactory, drawn: tuple[bytes, list[Expected | None]]
) -> None:
    data, expected = drawn
    path = tmp_path_factory.mktemp("csv") / "users.csv"
    path.write_bytes(data)
    items = list(users_from_csv(path))
    assert len(items) == len(expected)
    first_row_line = 3 if data.lstrip(b"\xef\xbb\xbf").startswith(b"sep=") else 2
    for offset, (item, user) in enumerate(zip(items, expected, strict=True)):
        if user is None:
            assert isinstance(item, InvalidInput)
            assert item.row == first_row_line + offset
            assert item.reason.startswith(f"line {item.row}: country_code: ")
            assert "(did you mean '+" in item.reason
        else:
            assert isinstance(item, User)
            got = {k.key: k.value for k in item.user_session_keys}
            assert (item.country_code, item.cellphone, got) == user


@given(st.sampled_from(DELIMITERS), st.lists(st.sampled_from(["name", "plan", "city"])))
def test_the_delimiter_is_the_one_that_splits_out_the_required_columns(
    delimiter: str, extra: list[str]
) -> None:
    columns = ["cellphone", *extra, "country_code"]
    assert sniff_delimiter(delimiter.join(columns) + "\r\n") == delimiter


def test_an_excel_file_in_a_spanish_locale_is_read(tmp_path: Path) -> None:
    # What Excel (es-CO) writes for "CSV UTF-8": BOM, semicolons, CRLF, decimal commas.
    path = tmp_path / "clientes.csv"
    path.write_bytes(
        "\ufeffcountry_code;cellphone;nombre;saldo\r\n"
        "+57;3001234567;Ana María;1.234,50\r\n"
        "57;3007654321;José;0,00\r\n".encode()
    )
    first, second = users_from_csv(path)
    assert isinstance(first, User)
    assert (first.country_code, first.cellphone) == ("+57", "3001234567")
    assert {k.key: k.value for k in first.user_session_keys} == {
        "nombre": "Ana María",
        "saldo": "1.234,50",
    }
    # The service's upload template writes the country code without its "+".
    assert isinstance(second, User)
    assert (second.country_code, second.cellphone) == ("+57", "3007654321")


def test_a_header_without_the_columns_says_how_it_was_split(tmp_path: Path) -> None:
    path = tmp_path / "users.csv"
    path.write_text("telefono,pais\n3001234567,+57\n")
    with pytest.raises(ValidationError) as info:
        list(users_from_csv(path))
    assert "read the columns 'telefono', 'pais' split on ','" in str(info.value)


def test_a_given_delimiter_wins_over_the_file_s_own(tmp_path: Path) -> None:
    path = tmp_path / "users.csv"
    path.write_text("sep=,\ncountry_code;cellphone;x\n+57;3001234567;a,b\n")
    [user] = users_from_csv(path, delimiter=";")
    assert isinstance(user, User)
    assert [(k.key, k.value) for k in user.user_session_keys] == [("x", "a,b")]
    # Without it, the file's sep= line is followed: its header is one column.
    with pytest.raises(ValidationError, match="split on ','"):
        list(users_from_csv(path))


@given(st.integers(1, 9999).filter(lambda n: not str(n).startswith("0")))
def test_a_country_code_without_its_plus_gets_the_fix(code: int) -> None:
    hint = f" (did you mean '+{code}'?)"
    for written in (str(code), code, f"00{code}", f"+ {code}", f" {code} "):
        assert country_code_hint(written) == hint


# Spaces only as the blank: any other whitespace is a separator too.
@given(
    st.text(st.characters(blacklist_categories=("Z", "Cc")) | st.just(" "), max_size=8).filter(
        lambda t: not t.strip(" +0-().").isdigit()
    )
)
def test_no_hint_for_what_is_no_country_code(text: str) -> None:
    assert country_code_hint(text) == ""


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), st.text("'=+-@\t\r x")))
def test_a_spreadsheet_cell_never_starts_a_formula_and_reads_back(value: str) -> None:
    cell = spreadsheet_cell(value)
    assert not cell.startswith(tuple(FORMULA_STARTS))
    assert as_written(cell) == value
    assert cell == value or cell == "'" + value  # only ever one quote added
