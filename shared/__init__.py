"""Code both services share: generated protobuf code, canonical JSON hashing and the error catalogue."""
