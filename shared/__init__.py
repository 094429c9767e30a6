"""Code both services share: generated protobuf code, canonical JSON hashing, error catalogue."""
