"""Who a person is: every way of writing one line reads as one Phone, and
different lines never share one."""

from __future__ import annotations

import orjson
import phonenumbers
import pytest
from helpers.phones import REGIONS, example, mobiles
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from campaignkit import Phone, User, ValidationError
from campaignkit._input import validation
from campaignkit._input.phones import country, read_phone, read_text
from campaignkit._wire import body as send_body


def forms(region: str, code: str, national: str) -> list[tuple[str, str]]:
    """Ways people and the network write the line (country code, cellphone)."""
    number = phonenumbers.parse(code + national)
    written = [
        (code, national),
        (code, phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.NATIONAL)),
        ("+0" + code[1:], national),  # the country code with a zero
        (code, code[1:] + national),  # the country code again in the cellphone
    ]
    if region == "MX":
        written.append((code, "1" + national))  # WhatsApp's +52 1
    if region == "AR":
        bare = national[1:] if national.startswith("9") else national
        written += [(code, bare), (code, "9" + bare)]  # with and without the mobile 9
    if region == "BR" and len(national) == 11 and national[2] == "9" and national[3] in "6789":
        written.append((code, national[:2] + national[3:]))  # no ninth digit
    return written


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mobiles())
def test_every_form_of_one_line_is_one_phone(person: tuple[str, str, str]) -> None:
    region, code, national = person
    assume(phonenumbers.is_valid_number(phonenumbers.parse(code + national)))
    read = {written: read_phone(*written) for written in forms(region, code, national)}
    keys = {phone.key if isinstance(phone, Phone) else phone for phone in read.values()}
    assert len(keys) == 1, read
    whole = read_text(
        phonenumbers.format_number(
            phonenumbers.parse(code + national), phonenumbers.PhoneNumberFormat.INTERNATIONAL
        )
    )
    assert isinstance(whole, Phone)
    assert whole.key in keys


@settings(max_examples=400, deadline=None)
@given(mobiles(), mobiles())
def test_different_lines_never_collide(
    one: tuple[str, str, str], other: tuple[str, str, str]
) -> None:
    first, second = (phonenumbers.parse(code + national) for _, code, national in (one, other))
    assume(phonenumbers.is_valid_number(first) and phonenumbers.is_valid_number(second))
    assume(first != second)
    a, b = read_phone(*one[1:]), read_phone(*other[1:])
    assert isinstance(a, Phone)
    assert isinstance(b, Phone)
    assert a != b
    assert a.key != b.key


@settings(max_examples=2000, deadline=None)
@given(st.sampled_from(REGIONS), st.data())
def test_the_fast_road_reads_as_phonenumbers_does(region: str, data: st.DataObject) -> None:
    code, _ = example(region)
    place = country(code)
    assert place is not None
    # Digits of about the lengths the country allows, the trunk prefix often at their head.
    size = data.draw(
        st.sampled_from(sorted(place.lengths)).map(
            lambda n: n + data.draw(st.sampled_from([-1, 0, 0, 0, 1]))
        )
    )
    digits = data.draw(st.text("0123456789", min_size=max(size, 1), max_size=max(size, 1)))
    assume(place.fast(digits))
    number = phonenumbers.parse(code + digits)
    assert phonenumbers.national_significant_number(number) == digits
    assert phonenumbers.is_possible_number_with_reason(number) == (
        phonenumbers.ValidationResult.IS_POSSIBLE
    )


@pytest.mark.parametrize("region", REGIONS)
def test_a_mobile_number_as_written_on_the_wire_takes_the_fast_road(region: str) -> None:
    code, national = example(region)
    place = country(code)
    assert place is not None
    assert place.fast(national)
    assert not place.fast(national + "0" * 8)  # longer than any of its numbers


@pytest.mark.parametrize(
    ("country_code", "cellphone", "key", "national"),
    [
        ("+44", "07700900123", "+447700900123", "7700900123"),  # the UK's trunk 0
        ("+61", "0412 345 678", "+61412345678", "412345678"),
        ("+52", "1 55 1234 5678", "+525512345678", "5512345678"),  # WhatsApp's +52 1
        ("+54", "9 11 1234 5678", "+541112345678", "91112345678"),  # Argentina's mobile 9
        ("+54", "11 15 1234 5678", "+541112345678", "91112345678"),  # and its 15
        ("+55", "11 8234 5678", "+5511982345678", "1182345678"),  # no ninth digit
        ("+057", "3001112233", "+573001112233", "3001112233"),
        ("+57", "573001112233", "+573001112233", "3001112233"),
        ("+7", "8 912 345 67 89", "+79123456789", "9123456789"),
        ("+39", "06 1234 5678", "+390612345678", "0612345678"),  # Italy's leading 0 is the number's
    ],
)
def test_known_forms(country_code: str, cellphone: str, key: str, national: str) -> None:
    phone = Phone.of(country_code, cellphone)
    assert (phone.key, phone.cellphone, str(phone)) == (key, national, key)
    assert phone.country_code == "+" + country_code.lstrip("+0")


@pytest.mark.parametrize(
    ("country_code", "cellphone", "field", "why"),
    [
        (
            "+57",
            "300111",
            "cellphone",
            "is too short: 6 digits, where numbers of +57 have 8, 10, 11",
        ),
        ("+44", "770090012345", "cellphone", "is too long"),
        ("+999", "3001234567", "country_code", "'+999' is no country's"),
        ("+57", "300-ABC", "cellphone", "must be digits"),
    ],
)
def test_impossible_numbers_say_why(
    country_code: str, cellphone: str, field: str, why: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        Phone.of(country_code, cellphone)
    [(path, message)] = raised.value.problems
    assert path == field
    assert why in message


def test_a_mobile_of_india_starting_with_its_country_code_is_itself() -> None:
    # 91 is India's country code and the head of many of its mobiles.
    assert Phone.of("+91", "9198765432").key == "+919198765432"
    assert Phone.of("+91", "919198765432").key == "+919198765432"


@settings(max_examples=2000, deadline=None)
@given(st.sampled_from(REGIONS), st.data())
def test_what_the_hot_paths_take_as_it_is_reading_leaves_as_it_is(
    region: str, data: st.DataObject
) -> None:
    code, _ = example(region)
    place = country(code)
    assert place is not None
    # Digits of the lengths the country allows, its country code often at their head.
    size = data.draw(st.sampled_from(sorted(place.lengths)))
    head = data.draw(st.sampled_from(["", place.digits]))[:size]
    digits = head + data.draw(
        st.text("0123456789", min_size=size - len(head), max_size=size - len(head))
    )
    assume(place.read_as_is(digits))
    phone = read_phone(code, digits)
    assert isinstance(phone, Phone)
    assert phone.cellphone == digits


@pytest.mark.parametrize("region", REGIONS)
def test_a_country_code_written_again_reads_alike_on_every_road(region: str) -> None:
    # India's 91 8123456789 was sent as it is once its country had been read
    # (by the one-user road), or by the whole-body road: a 12-digit number.
    code, national = example(region)
    user = User(cellphone=code[1:] + national, country_code=code, user_session_keys={"k": "v"})
    expected = validation.user_wire(user, "users[0]", [])
    assert expected is not None
    assert send_body.user_wire_at(user, 0, []) == expected
    assert send_body.user_wire_at(user, 0, []) == expected  # its country read now
    assert orjson.dumps(send_body.users_wire((user,), [])) == orjson.dumps([expected])


def test_a_whole_number_as_text() -> None:
    assert Phone.parse("+57 300 123 4567") == Phone.parse("0057 (300) 123-4567")
    assert Phone.parse("+52 1 55 1234 5678") == Phone.of("+52", "5512345678")
    assert hash(Phone.parse("+44 07700 900123")) == hash(Phone.of("+44", "7700900123"))
    assert repr(Phone.parse("+57 300 123 4567")) == "Phone('+573001234567')"
    with pytest.raises(ValidationError, match="number: starts with no country code"):
        Phone.parse("+999 123 4567")
    with pytest.raises(ValidationError, match="number: must be a phone number"):
        Phone.parse("300 123 4567")


def test_user_from_phone_splits_a_whole_number() -> None:
    user = User.from_phone("+57 300 123 4567", user_session_keys={"name": "Ana"})
    assert (user.country_code, user.cellphone) == ("+57", "3001234567")
    assert user.user_session_keys[0].value == "Ana"
    with pytest.raises(ValidationError, match="number"):
        User.from_phone("3001234567")
