"""Generated gRPC code (scripts/gen_protos from protos/); do not edit."""
