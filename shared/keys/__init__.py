"""Per-document-version data keys: what makes a forgotten document unreadable everywhere.

`store.VersionKeys` keeps one random key per document version, wrapped by a key-encryption
key, where a deletion is real (SQLite with secure_delete); `sealing.VersionKey` derives
from it the keys that seal a record's text and key its audit hashes. Destroying a
version's key (`streamrag forget`) leaves every sealed copy of its text, on any topic or
in any backup, unreadable, and its audit leaves unable to confirm a guess.
"""
