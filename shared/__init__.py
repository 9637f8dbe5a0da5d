"""What two or more streamrag services need: the topic contract, records, settings, errors."""
