"""Helpers the test modules share: waiting (polling), the mesh's user-side clients, anvil.

Test modules import from here, never from one another."""
