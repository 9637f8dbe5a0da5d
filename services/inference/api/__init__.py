"""The gRPC API: server and handlers, the status-mapping and auth interceptors, and the
conversion to and from protobuf (convert). It imports the engine; the engine never imports it."""
