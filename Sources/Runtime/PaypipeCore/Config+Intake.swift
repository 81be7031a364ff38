extension PaypipeConfig {
    /// What one intake connection may make the ledger hold (docs/operations.md, "Intake
    /// memory"). libzmq counts its receive queue in messages, not bytes, so the queue's length is
    /// derived from the budget and the largest frame: every frame in it may be that large.
    public struct Intake: Sendable, Equatable {
        /// The largest intake frame read; libzmq closes a connection that brings a larger one.
        /// Frames between `Order.maxFrameBytes` and this are read, then refused or dropped.
        public var maxFrameBytes: Int64 = 2 << 20
        /// The most the frames of one intake connection may take of the ledger's memory.
        public var memoryBudgetBytes: Int64 = 640 << 20

        public init() {}

        /// The bytes of frames one ledger pass reads from a socket before it stops (it holds at
        /// most one frame more).
        public static let passBytes: Int64 = 8 << 20
        /// Frames in hand besides the receive queue: the one libzmq is reading off the
        /// connection, the one a pass reads past `passBytes`, the copy of it being received, and
        /// what decoding an oversized one builds.
        static let framesInHand: Int64 = 4
        /// The receive queue's bounds: a whole pass of small orders fits in it, so a pass still
        /// takes a full batch from one connection; beyond libzmq's usual 1,000 nothing is gained.
        public static let receiveQueueRange: ClosedRange<Int64> = 256...1000
        public static let maxFrameBytesRange: ClosedRange<Int64> = Int64(Order.maxFrameBytes)...(64 << 20)

        /// The intake socket's receive HWM: what the budget leaves, in frames of the largest size,
        /// once a pass's frames and those in hand are counted.
        public var receiveQueueFrames: Int64 {
            min(Self.receiveQueueRange.upperBound, (memoryBudgetBytes - Self.passBytes) / maxFrameBytes - Self.framesInHand)
        }

        /// The smallest budget that leaves `frames` in the receive queue at `maxFrameBytes`.
        static func budget(forQueue frames: Int64, maxFrameBytes: Int64) -> Int64 {
            (frames + framesInHand) * maxFrameBytes + passBytes
        }

        static func parse(_ i: inout ConfigReader) throws(ConfigError) -> Self {
            var intake = Self()
            intake.maxFrameBytes = try i.positiveInteger("maxFrameBytes") ?? intake.maxFrameBytes
            guard maxFrameBytesRange.contains(intake.maxFrameBytes) else {
                throw ConfigError(
                    path: i.child("maxFrameBytes"),
                    reason:
                        "must be from \(maxFrameBytesRange.lowerBound) (the largest order) to \(maxFrameBytesRange.upperBound) bytes")
            }
            intake.memoryBudgetBytes = try i.positiveInteger("memoryBudgetBytes") ?? intake.memoryBudgetBytes
            let smallest = budget(forQueue: receiveQueueRange.lowerBound, maxFrameBytes: intake.maxFrameBytes)
            guard intake.memoryBudgetBytes >= smallest else {
                throw ConfigError(
                    path: i.child("memoryBudgetBytes"),
                    reason:
                        "must be at least \(smallest) bytes with intake.maxFrameBytes \(intake.maxFrameBytes): a receive queue of \(receiveQueueRange.lowerBound) frames of that size, a pass's \(passBytes) bytes and \(framesInHand) frames in hand"
                )
            }
            try i.finish()
            return intake
        }
    }
}
