// swift-tools-version:6.1
import PackageDescription

let strict: [SwiftSetting] = [.swiftLanguageMode(.v6)]

/// The benchmarks under bench/ are built only when asked, with `PAYPIPE_BENCHMARKS=1` (every
/// script under bench/ sets it): a plain `swift build` builds the pipeline and its tests alone.
let benchmarks = Context.environment["PAYPIPE_BENCHMARKS"] == "1"

let crypto = Target.Dependency.product(name: "Crypto", package: "swift-crypto")

/// What the sandbox and its emulators serve HTTP with.
let sandboxDependencies: [Target.Dependency] = [
    .product(name: "Hummingbird", package: "hummingbird"),
    .product(name: "AsyncHTTPClient", package: "async-http-client"),
    .product(name: "Logging", package: "swift-log"),
    .product(name: "NIOCore", package: "swift-nio"),
    .product(name: "NIOPosix", package: "swift-nio"),
    .product(name: "HTTPTypes", package: "swift-http-types"),
    .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
    .product(name: "UnixSignals", package: "swift-service-lifecycle"),
]

/// Every provider, one folder each in Sources/Providers/<name>: its connector module (Connector/),
/// its sandbox emulator (Emulator/, module <name>Emulation), the fixtures of its published messages
/// (Fixtures/), the testing module other suites share (Testing/, module <name>Testing) and its
/// tests (Tests/). The registries (`Connectors`, `Emulators`), the sandbox and the tests take the
/// list from here.
let providers: [(name: String, dependencies: [Target.Dependency])] = [
    ("TrustPayments", [crypto, .product(name: "JWTKit", package: "jwt-kit")]),
    ("NetsEasy", [crypto]),
    ("PhonePe", [crypto]),
    ("Cleeng", []),
    ("Viva", []),
]
let providerModules = providers.map { Target.Dependency.target(name: $0.name) }
let emulatorModules = providers.map { Target.Dependency.target(name: "\($0.name)Emulation") }
let providerTestingModules = providers.map { Target.Dependency.target(name: "\($0.name)Testing") }
let stageModules = ["LedgerStage", "SignerStage", "SubmitterStage", "CallbacksStage", "PollerStage", "StreamerStage"]

/// One module per stage, in Sources/Stages/<name>: its core, its store or client, its `Service`.
func stage(_ name: String, _ extra: [Target.Dependency] = []) -> Target {
    .target(
        name: name,
        dependencies: [
            "PaypipeCore", "StageWire", "StageRuntime", "ZeroMQ",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "Prometheus", package: "swift-prometheus"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "Tracing", package: "swift-distributed-tracing"),
        ] + extra,
        path: "Sources/Stages/\(name)",
        swiftSettings: strict
    )
}

/// What the stage tests and their support use: every stage, every provider (its connector,
/// emulator and fixtures), the sandbox.
let stageTestDependencies: [Target.Dependency] =
    [
        "PaypipeCore", "ZeroMQ", "Sandbox", "Emulators", "Connectors", "StageWire", "StageRuntime", "HTTPTransport", "CSQLite", "Supervision",
        .product(name: "Logging", package: "swift-log"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "NIOPosix", package: "swift-nio"),
        .product(name: "NIOHTTP1", package: "swift-nio"),
        .product(name: "NIOSSL", package: "swift-nio-ssl"),
        .product(name: "Hummingbird", package: "hummingbird"),
        .product(name: "HTTPTypes", package: "swift-http-types"),
    ] + stageModules.map { .target(name: $0) } + providerModules + emulatorModules + providerTestingModules

/// The unit tests of one module (Tests/<module>Tests), or the integration tests.
func stageTests(_ name: String, _ extra: [Target.Dependency] = []) -> Target {
    .testTarget(
        name: name,
        dependencies: ["TestSupport", .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"), crypto]
            + stageTestDependencies + extra,
        swiftSettings: strict
    )
}

/// What every process shares, in Sources/Runtime/<name>.
func runtime(_ name: String, _ dependencies: [Target.Dependency]) -> Target {
    .target(name: name, dependencies: dependencies, path: "Sources/Runtime/\(name)", swiftSettings: strict)
}

/// A stage executable only wires its stage to the standard connectors and the shared options.
func stageExecutable(_ name: String, _ stage: String, _ extra: [Target.Dependency] = []) -> Target {
    .executableTarget(
        name: name,
        dependencies: [
            .target(name: stage), "Connectors", "StageRuntime", "PaypipeCore",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ] + extra,
        path: "Sources/Executables/\(name)",
        swiftSettings: strict
    )
}

/// A provider's folder: its connector, its emulator, its testing module and its tests.
func providerFolder(_ provider: (name: String, dependencies: [Target.Dependency])) -> [Target] {
    let folder = "Sources/Providers/\(provider.name)"
    let connector = Target.Dependency.target(name: provider.name)
    let testing = Target.Dependency.target(name: "\(provider.name)Testing")
    return [
        .target(name: provider.name, dependencies: ["PaypipeCore"] + provider.dependencies, path: "\(folder)/Connector", swiftSettings: strict),
        .target(
            name: "\(provider.name)Emulation", dependencies: [connector, "Sandbox", "PaypipeCore", crypto] + sandboxDependencies,
            path: "\(folder)/Emulator", swiftSettings: strict),
        .target(
            name: "\(provider.name)Testing", dependencies: [connector, "FixtureCorpus", "PaypipeCore"], path: "\(folder)/Testing",
            swiftSettings: strict),
        .testTarget(
            name: "\(provider.name)Tests", dependencies: [connector, testing, "FixtureCorpus", "PaypipeCore", "Connectors", crypto],
            path: "\(folder)/Tests", swiftSettings: strict),
    ]
}

let package = Package(
    name: "paypipe",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "ZeroMQ", targets: ["ZeroMQ"]),
        .library(name: "PaypipeCore", targets: ["PaypipeCore"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto", exact: "4.5.2"),
        .package(url: "https://github.com/vapor/jwt-kit", exact: "5.8.0"),
        // Without the default traits: "FullFoundation" would link Foundation and ICU into every
        // stage, and nothing here reads configuration through it.
        .package(url: "https://github.com/hummingbird-project/hummingbird", exact: "2.28.1", traits: []),
        .package(url: "https://github.com/swift-server/async-http-client", exact: "1.37.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", exact: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", exact: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", exact: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", exact: "2.4.1"),
        .package(url: "https://github.com/apple/swift-nio", exact: "2.101.3"),
        .package(url: "https://github.com/apple/swift-nio-ssl", exact: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-extras", exact: "1.35.2"),
        .package(url: "https://github.com/apple/swift-http-types", exact: "1.8.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", exact: "0.2.0"),
        .package(url: "https://github.com/vapor/postgres-nio", exact: "1.33.2"),
        // Tracing (off unless configured): swift-otel's tracer and its OTLP/HTTP exporter only.
        .package(url: "https://github.com/swift-otel/swift-otel", exact: "1.6.0", traits: ["OTLPHTTP"]),
        .package(url: "https://github.com/apple/swift-distributed-tracing", exact: "1.7.3"),
    ],
    targets: [
        // C libraries, in Sources/CLibraries.
        .systemLibrary(name: "CZeroMQ", path: "Sources/CLibraries/CZeroMQ", providers: [.apt(["libzmq3-dev"])]),
        .systemLibrary(name: "CSQLite", path: "Sources/CLibraries/CSQLite", providers: [.apt(["libsqlite3-dev"])]),
        // The ledger's SQLite files: a commit's WAL frames reach the file in one write (see wal_buffer.c).
        .target(name: "SQLiteWALBuffer", path: "Sources/CLibraries/SQLiteWALBuffer", linkerSettings: [.linkedLibrary("sqlite3")]),
        // A stage that links it keeps its heap in one malloc arena (see one_malloc_arena.c).
        .target(name: "OneMallocArena", path: "Sources/CLibraries/OneMallocArena"),

        runtime("ZeroMQ", ["CZeroMQ"]),
        // Orders, outcomes, config, the connector seam: what every module speaks.
        runtime("PaypipeCore", [crypto]),
        // What the stages say to each other: work items, dispatch frames, the ledger RPC.
        runtime("StageWire", ["PaypipeCore"]),
        runtime(
            "HTTPTransport",
            [
                "PaypipeCore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]),
        // Child processes: spawned, waited for, stopped and reaped in one place.
        runtime("Supervision", []),
        // What every stage process shares: options, config loading, metrics server, sockets.
        runtime(
            "StageRuntime",
            [
                "PaypipeCore", "StageWire", "ZeroMQ", "HTTPTransport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "OTel", package: "swift-otel"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]),
    ]
        + providers.flatMap(providerFolder) + [
            // Reads the fixtures every provider keeps in its Fixtures/ folder.
            .target(name: "FixtureCorpus", dependencies: ["PaypipeCore"], path: "Sources/Providers/FixtureCorpus", swiftSettings: strict),
            // The registry: one line per provider.
            .target(name: "Connectors", dependencies: ["PaypipeCore"] + providerModules, path: "Sources/Providers/Connectors", swiftSettings: strict),
            stage(
                "LedgerStage",
                [
                    "StreamerStage", "CSQLite", "SQLiteWALBuffer", .product(name: "Hummingbird", package: "hummingbird"),
                    .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
                    .product(name: "NIOSSL", package: "swift-nio-ssl"), .product(name: "PostgresNIO", package: "postgres-nio"),
                ]),
            stage("SignerStage"),
            stage("StreamerStage"),
            stage("SubmitterStage", ["HTTPTransport", .product(name: "NIOCore", package: "swift-nio")]),
            stage(
                "CallbacksStage",
                [
                    "HTTPTransport", .product(name: "Hummingbird", package: "hummingbird"), .product(name: "HTTPTypes", package: "swift-http-types"),
                    .product(name: "NIOCore", package: "swift-nio"),
                ]),
            stage("PollerStage", ["HTTPTransport", .product(name: "NIOCore", package: "swift-nio")]),
            // The sandbox server: what every emulator shares (routing, ledger, clock, outbound
            // deliveries); it knows no provider.
            .target(name: "Sandbox", dependencies: ["PaypipeCore", crypto] + sandboxDependencies, swiftSettings: strict),
            // The emulators' registry: one line per provider.
            .target(
                name: "Emulators", dependencies: ["Sandbox", "PaypipeCore"] + emulatorModules, path: "Sources/Providers/Emulators",
                swiftSettings: strict),
            .executableTarget(
                name: "paypipe-sandbox",
                dependencies: [
                    "Sandbox", "Emulators", "Connectors", "PaypipeCore", .product(name: "ArgumentParser", package: "swift-argument-parser"),
                ]
                    + emulatorModules,
                path: "Sources/Executables/paypipe-sandbox",
                swiftSettings: strict
            ),
            .testTarget(
                name: "SandboxTests",
                dependencies: [
                    "Sandbox", "Emulators", "PaypipeCore", "TestSupport",
                ] + providerModules + emulatorModules + providerTestingModules + [
                    .product(name: "AsyncHTTPClient", package: "async-http-client"),
                    .product(name: "Hummingbird", package: "hummingbird"),
                    .product(name: "HTTPTypes", package: "swift-http-types"),
                    .product(name: "NIOCore", package: "swift-nio"),
                    .product(name: "Logging", package: "swift-log"),
                ],
                swiftSettings: strict
            ),
            stageExecutable("paypipe-ledger", "LedgerStage"),
            stageExecutable("paypipe-signer", "SignerStage", ["OneMallocArena"]),
            stageExecutable("paypipe-submitter", "SubmitterStage"),
            stageExecutable("paypipe-callbacks", "CallbacksStage"),
            stageExecutable("paypipe-cleeng-poller", "PollerStage"),
            stageExecutable("paypipe-streamer", "StreamerStage"),
            .executableTarget(
                name: "paypipe",
                dependencies: [
                    "StageRuntime", "PaypipeCore", "ZeroMQ", "Connectors", "StageWire", "HTTPTransport", "Supervision", "LedgerStage",
                    .product(name: "ArgumentParser", package: "swift-argument-parser"),
                    .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                ],
                path: "Sources/Executables/paypipe",
                swiftSettings: strict
            ),
            // A made-up sixth provider that exists only for the tests, in one folder: its connector
            // (config section, polling) and its sandbox emulator. It proves the seams a provider
            // plugs into, through the real stage processes.
            .target(
                name: "ExampleConnector", dependencies: ["PaypipeCore", .product(name: "Crypto", package: "swift-crypto")],
                path: "Tests/ExampleProvider/Connector", swiftSettings: strict),
            .target(
                name: "ExampleEmulation",
                dependencies: ["ExampleConnector", "Sandbox", "PaypipeCore", .product(name: "Logging", package: "swift-log")],
                path: "Tests/ExampleProvider/Emulator",
                swiftSettings: strict),
            .executableTarget(
                name: "paypipe-example-stages",
                dependencies: ["ExampleConnector", "Connectors", "StageRuntime"] + stageModules.map { .target(name: $0) }
                    + [.product(name: "ArgumentParser", package: "swift-argument-parser")],
                path: "Tests/ExampleStages",
                swiftSettings: strict
            ),
            // Every input a process reads from outside, as functions of bytes: for libFuzzer
            // (Tests/Fuzz/run) and for the corpus the tests replay.
            .target(
                name: "FuzzTargets",
                dependencies: [
                    "CallbacksStage", "Cleeng", "PollerStage", "Connectors", "HTTPTransport", "LedgerStage", "PaypipeCore",
                    "PhonePe", "SignerStage", "StageRuntime", "StageWire", "SubmitterStage", "TrustPayments",
                    .product(name: "NIOCore", package: "swift-nio"),
                ],
                path: "Tests/FuzzTargets",
                swiftSettings: strict
            ),
            .executableTarget(
                name: "paypipe-fuzz", dependencies: ["FuzzTargets", "PaypipeCore"], path: "Tests/Fuzz", exclude: ["run", "corpus"],
                swiftSettings: strict),
            // What the stage tests share: the pipeline harness (real processes), fixtures, loopback
            // servers, temporary stores.
            .target(
                name: "TestSupport",
                dependencies: stageTestDependencies,
                path: "Tests/TestSupport",
                swiftSettings: strict
            ),
            // Everything through real processes, and the stages' cores working together.
            stageTests("IntegrationTests", ["ExampleConnector", "ExampleEmulation", "FuzzTargets", "SQLiteWALBuffer"]),
        ] + ["StageWire", "StageRuntime", "HTTPTransport", "Supervision"].map { stageTests("\($0)Tests") }
        + stageModules.map { stageTests("\($0)Tests", $0 == "LedgerStage" ? ["SQLiteWALBuffer"] : []) } + [
            .testTarget(name: "ZeroMQTests", dependencies: ["ZeroMQ"], swiftSettings: strict),
            .testTarget(name: "PaypipeCoreTests", dependencies: ["PaypipeCore", "Connectors"], swiftSettings: strict),
        ]
        + (benchmarks ? benchmarkTargets : [])
)

var benchmarkTargets: [Target] {
    [
        .executableTarget(
            name: "paypipe-signing-bench",
            dependencies: ["BenchSupport", "PaypipeCore", "TrustPayments", "PhonePe"],
            path: "bench/signing",
            swiftSettings: strict
        ),
        .executableTarget(
            name: "paypipe-poller-bench",
            dependencies: ["BenchSupport", "Connectors", "StageRuntime", "StageWire", "PaypipeCore", "ZeroMQ"],
            path: "bench/poller",
            exclude: ["run", "nginx-cleeng.conf"],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "paypipe-ledger-bench",
            dependencies: ["BenchSupport", "Connectors", "StageRuntime", "PaypipeCore", "ZeroMQ", "CSQLite"],
            path: "bench/ledger",
            swiftSettings: strict
        ),
        .executableTarget(
            name: "paypipe-frames-bench",
            dependencies: [
                "BenchSupport", "Connectors", "HTTPTransport", "PaypipeCore", "SignerStage", "StageRuntime", "StageWire", "SubmitterStage",
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "bench/frames",
            swiftSettings: strict
        ),
        .executableTarget(
            name: "paypipe-store-bench",
            dependencies: ["BenchSupport", "Connectors", "LedgerStage", "PaypipeCore", "SignerStage", "StageRuntime", "StageWire", "SubmitterStage"],
            path: "bench/store",
            swiftSettings: strict
        ),
        .executableTarget(
            name: "paypipe-schedules-bench",
            dependencies: ["BenchSupport", "Connectors", "PaypipeCore", "StageRuntime", "Supervision", "ZeroMQ"],
            path: "bench/schedules",
            exclude: ["run"],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "paypipe-zmq-bench",
            dependencies: ["ZeroMQ", "CZeroMQ", "Supervision"],
            path: "bench/zmq",
            swiftSettings: strict
        ),
        .target(
            name: "BenchSupport", dependencies: ["Supervision"], path: "bench/support", exclude: ["pipeline-up.sh", "w1rate.sh", "charts.py"],
            swiftSettings: strict),
        .executableTarget(
            name: "paypipe-bench",
            dependencies: [
                "BenchSupport", "Connectors", "PaypipeCore", "ZeroMQ", "StageRuntime", "Supervision",
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "bench/driver",
            swiftSettings: strict
        ),
    ]
}
