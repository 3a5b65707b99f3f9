"""What users hand the SDK: users and session keys coerced from dicts, CSV
rows and JSON, phone numbers normalised, and every call's input validated
before a request is built."""
