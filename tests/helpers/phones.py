"""Phone numbers for property tests: real countries' mobile numbers."""

from __future__ import annotations

import phonenumbers
from hypothesis import strategies as st

REGIONS = ("CO", "GB", "AU", "MX", "AR", "BR", "US", "RU", "ES", "DE", "IN", "FR", "IT", "CL")


def example(region: str) -> tuple[str, str]:
    """The country code and national number of ``region``'s example mobile."""
    number = phonenumbers.example_number_for_type(region, phonenumbers.PhoneNumberType.MOBILE)
    assert number is not None
    return f"+{number.country_code}", phonenumbers.national_significant_number(number)


@st.composite
def mobiles(draw: st.DrawFn, regions: tuple[str, ...] = REGIONS) -> tuple[str, str, str]:
    """A region and a mobile number of it (country code, national number):
    its example with another ending, so of the lengths the country allows."""
    region = draw(st.sampled_from(regions))
    code, national = example(region)
    ending = draw(st.text("0123456789", min_size=4, max_size=4))
    return region, code, national[:-4] + ending
