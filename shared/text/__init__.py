"""Pure text helpers shared by ingest and redaction: the visible reading of a text (hidden
characters removed or mapped, with offsets back to the original) and checksum tests (Luhn,
IBAN) that tell an identifier from a number."""
