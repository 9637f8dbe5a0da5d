"""Keys of funded accounts on the in-process chain: eth-tester funds the accounts whose
private keys are the integers 1..10."""

OWNER_KEY = "0x" + "00" * 31 + "01"
INTRUDER_KEY = "0x" + "00" * 31 + "02"
