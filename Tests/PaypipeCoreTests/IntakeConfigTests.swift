import PaypipeCore
import Testing

@Suite("Config: intake limits")
struct IntakeConfigTests {
    static func withIntake(_ section: String) -> String {
        sampleConfig.replacingFirst(#""timers": {"#, with: #""intake": "# + section + #", "timers": {"#)
    }

    /// The receive queue is what the budget leaves in frames of the largest size, so that a
    /// sender of nothing but such frames stays within it.
    @Test func theReceiveQueueIsDerivedFromTheBudgetAndTheFrameLimit() throws {
        let defaults = try parse(sampleConfig).intake
        #expect(defaults.maxFrameBytes == 2 << 20 && defaults.memoryBudgetBytes == 640 << 20)
        #expect(defaults.receiveQueueFrames == 312)
        let configured = try parse(Self.withIntake(#"{ "maxFrameBytes": 1048576, "memoryBudgetBytes": 536870912 }"#)).intake
        #expect(configured.receiveQueueFrames == (512 - 8) - 4)
        // Small frames: libzmq's usual queue, no longer.
        #expect(try parse(Self.withIntake(#"{ "maxFrameBytes": 65536 }"#)).intake.receiveQueueFrames == 1000)
        for intake in [defaults, configured] {
            let held = (intake.receiveQueueFrames + 4) * intake.maxFrameBytes + PaypipeConfig.Intake.passBytes
            #expect(held <= intake.memoryBudgetBytes)
        }
    }

    @Test(arguments: [
        (#"{ "maxFrameBytes": 1000 }"#, "intake.maxFrameBytes: must be from 65536 (the largest order) to 67108864 bytes"),
        (#"{ "maxFrameBytes": 134217728 }"#, "intake.maxFrameBytes: must be from 65536 (the largest order) to 67108864 bytes"),
        (#"{ "maxFrameBytes": "2MiB" }"#, "intake.maxFrameBytes: must be a positive integer"),
        (
            #"{ "maxFrameBytes": 4194304 }"#,
            "intake.memoryBudgetBytes: must be at least 1098907648 bytes with intake.maxFrameBytes 4194304: a receive queue of 256 frames of that size, a pass's 8388608 bytes and 4 frames in hand"
        ),
        (#"{ "memoryBudgetBytes": 0 }"#, "intake.memoryBudgetBytes: must be a positive integer"),
        (#"{ "rcvhwm": 10 }"#, "intake.rcvhwm: unknown key"),
    ])
    func intakeMistakesAreNamed(section: String, expected: String) {
        do {
            _ = try parse(Self.withIntake(section))
            Issue.record("expected \(expected)")
        } catch {
            #expect(error.description == expected)
        }
    }
}
