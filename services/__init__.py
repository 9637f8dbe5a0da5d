"""The mesh's services: one Faust app per package, meeting only through topics and gRPC."""
