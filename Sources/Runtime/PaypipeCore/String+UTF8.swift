extension String {
    /// Byte-for-byte equality. Swift's own `==` is canonical equivalence ("\u{212A}iosk" ==
    /// "Kiosk"), while the store and every idempotency key tell such spellings apart. Over the
    /// contiguous bytes: `utf8.elementsEqual` would go byte by byte through the view's iterator.
    package func hasSameUTF8(as other: String) -> Bool {
        let compared = utf8.withContiguousStorageIfAvailable { mine in
            other.utf8.withContiguousStorageIfAvailable { theirs in mine.count == theirs.count && mine.elementsEqual(theirs) }
        }
        return (compared ?? nil) ?? utf8.elementsEqual(other.utf8)
    }

    /// Feeds the UTF-8 bytes to `hasher` in one call (a hash consistent with `hasSameUTF8`).
    package func hashUTF8(into hasher: inout Hasher) {
        if utf8.withContiguousStorageIfAvailable({ hasher.combine(bytes: UnsafeRawBufferPointer($0)) }) == nil {
            Array(utf8).withUnsafeBytes { hasher.combine(bytes: $0) }
        }
    }
}
