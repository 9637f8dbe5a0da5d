"""Pure text helpers shared by ingest and redaction: the visible reading of a text (hidden
characters removed or mapped, with offsets back to the original), the normalised view a
person reads (spelled digits, look-alike letters, spelled e-mail marks, percent-encoding),
encoded payloads, check digits (Luhn, IBAN, national numbers) and the national numbers of
the served locales, which tell an identifier from a number."""
