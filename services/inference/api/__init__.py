"""The gRPC API: server and handlers, the status-mapping and auth interceptors, request
checks (params) and the conversion to and from protobuf (convert, render)."""
