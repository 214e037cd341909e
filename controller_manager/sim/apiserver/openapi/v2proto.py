def document(doc: dict) -> bytes:
    raise NotImplementedError
