import PaypipeCore

/// Seqs alone cannot tell upstream that the store went back in time: a store restored from an
/// older copy hands out again seqs that upstream has already seen, for other outcomes. So every
/// opening of the store (a ledger start, or a new connection to PostgreSQL, which may have been
/// restored meanwhile) begins an epoch, recorded with the last seq handed out before it, and
/// every logged outcome names its epoch beside its seq. A store restored from a copy lacks the
/// epochs begun after the copy, and its current epoch began below seqs upstream saw in the
/// epoch before: either way `replayContinues` tells upstream, instead of a gap it cannot see.
extension LedgerStore {
    /// Begins a new epoch after the last seq handed out. Call inside `transaction`.
    func openEpoch() throws {
        // Ledgers opening together number their epochs one at a time.
        try takeStoreLock()
        let number = (try db.query("SELECT MAX(number) FROM epochs").first?[0].integer ?? 0) + 1
        let id = Self.newEpochID()
        let last = try lastSeq()
        try db.query(
            "INSERT INTO epochs(epoch, number, opened_after, opened_at, last_seq) VALUES(?,?,?,?,?)",
            [.text(id), .integer(number), .integer(last), .integer(Timestamp.nowMilliseconds()), .integer(last)])
        epoch = id
    }

    /// Sixteen hex digits: unique enough that no two openings of any store share one.
    static func newEpochID() -> String {
        var generator = SystemRandomNumberGenerator()
        let value = generator.next() as UInt64
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}

extension StoreReads {
    /// Whether this store's log holds, unchanged, everything an upstream saw up to `seq` of
    /// `epoch`: the epoch is one of this store's, and the store handed out `seq` in it. Each
    /// epoch keeps the highest seq logged in it, since several ledgers' epochs run at once over
    /// one PostgreSQL database and interleave their seqs.
    package func replayContinues(epoch: String, after seq: Int64) throws -> Bool {
        guard let row = try db.query("SELECT last_seq FROM epochs WHERE epoch=?", [.text(epoch)]).first, let last = row[0].integer else {
            return false
        }
        return seq <= last
    }
}
