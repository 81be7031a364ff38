/// Runs delayed background work (S2S callbacks, webhook deliveries, the emulated customer
/// finishing a hosted page) as children of the server's task, so shutting the server down
/// cancels whatever is still waiting instead of leaking unstructured tasks.
public final class SandboxScheduler: Sendable {
    package struct Job: Sendable {
        var delayMilliseconds: Int
        var work: @Sendable () async -> Void
    }

    private let jobs: AsyncStream<Job>
    private let continuation: AsyncStream<Job>.Continuation

    package init() {
        (jobs, continuation) = AsyncStream.makeStream(of: Job.self)
    }

    public func schedule(afterMilliseconds delay: Int, _ work: @escaping @Sendable () async -> Void) {
        continuation.yield(Job(delayMilliseconds: max(0, delay), work: work))
    }

    /// Runs jobs until `finish()` and the jobs already started are done, or until cancelled.
    package func run() async {
        await withDiscardingTaskGroup { group in
            for await job in jobs {
                group.addTask {
                    if job.delayMilliseconds > 0 {
                        do { try await Task.sleep(for: .milliseconds(job.delayMilliseconds)) } catch { return }
                    }
                    await job.work()
                }
            }
        }
    }

    package func finish() { continuation.finish() }
}
