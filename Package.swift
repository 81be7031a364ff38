// swift-tools-version:6.1
import PackageDescription

let strict: [SwiftSetting] = [.swiftLanguageMode(.v6)]

let providers = ["TrustPayments", "NetsEasy", "PhonePe", "Cleeng", "Viva"]

let package = Package(
    name: "paypipe",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "ZeroMQ", targets: ["ZeroMQ"]),
        .library(name: "PaypipeCore", targets: ["PaypipeCore"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.8.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CZeroMQ",
            providers: [.apt(["libzmq3-dev"])]
        ),
        .target(name: "ZeroMQ", dependencies: ["CZeroMQ"], swiftSettings: strict),
        .target(
            name: "PaypipeCore",
            dependencies: [.product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: strict
        ),
        .target(
            name: "TrustPayments",
            dependencies: [
                "PaypipeCore",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "JWTKit", package: "jwt-kit"),
            ],
            swiftSettings: strict
        ),
        .target(name: "NetsEasy", dependencies: ["PaypipeCore", .product(name: "Crypto", package: "swift-crypto")], swiftSettings: strict),
        .target(name: "PhonePe", dependencies: ["PaypipeCore", .product(name: "Crypto", package: "swift-crypto")], swiftSettings: strict),
        .target(name: "Cleeng", dependencies: ["PaypipeCore"], swiftSettings: strict),
        .target(name: "Viva", dependencies: ["PaypipeCore"], swiftSettings: strict),
        .systemLibrary(name: "CSQLite", providers: [.apt(["libsqlite3-dev"])]),
        .target(
            name: "Pipeline",
            dependencies: [
                "PaypipeCore", "ZeroMQ", "CSQLite", "TrustPayments", "NetsEasy", "PhonePe", "Cleeng", "Viva",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "Sandbox",
            dependencies: [
                "PaypipeCore", "TrustPayments", "NetsEasy", "PhonePe", "Cleeng", "Viva",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "paypipe-sandbox",
            dependencies: ["Sandbox", "PaypipeCore", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: strict
        ),
        .testTarget(
            name: "SandboxTests",
            dependencies: [
                "Sandbox", "PaypipeCore", "TrustPayments", "NetsEasy", "PhonePe", "Cleeng", "Viva",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(name: "paypipe-ledger", dependencies: ["Pipeline", "PaypipeCore", .product(name: "ArgumentParser", package: "swift-argument-parser")], swiftSettings: strict),
        .executableTarget(name: "paypipe-signer", dependencies: ["Pipeline", "PaypipeCore", .product(name: "ArgumentParser", package: "swift-argument-parser")], swiftSettings: strict),
        .executableTarget(name: "paypipe-submitter", dependencies: ["Pipeline", "PaypipeCore", .product(name: "ArgumentParser", package: "swift-argument-parser")], swiftSettings: strict),
        .executableTarget(name: "paypipe-callbacks", dependencies: ["Pipeline", "PaypipeCore", .product(name: "ArgumentParser", package: "swift-argument-parser")], swiftSettings: strict),
        .executableTarget(name: "paypipe-cleeng-poller", dependencies: ["Pipeline", "PaypipeCore", .product(name: "ArgumentParser", package: "swift-argument-parser")], swiftSettings: strict),
        .executableTarget(
            name: "paypipe",
            dependencies: [
                "Pipeline", "PaypipeCore", "ZeroMQ",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "PipelineTests",
            dependencies: ["Pipeline", "PaypipeCore", "ZeroMQ", "Sandbox", "PhonePe", "TrustPayments", "NetsEasy", "Cleeng", "Viva", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "paypipe-signing-bench",
            dependencies: ["PaypipeCore", "TrustPayments", "PhonePe"],
            path: "bench/signing",
            swiftSettings: strict
        ),
        .executableTarget(
            name: "paypipe-poller-bench",
            dependencies: ["BenchSupport", "Pipeline", "PaypipeCore", "ZeroMQ"],
            path: "bench/poller",
            swiftSettings: strict
        ),
        .executableTarget(
            name: "paypipe-zmq-bench",
            dependencies: ["ZeroMQ", "CZeroMQ"],
            path: "bench/zmq",
            swiftSettings: strict
        ),
        .target(name: "BenchSupport", path: "bench/support", swiftSettings: strict),
        .executableTarget(
            name: "paypipe-bench",
            dependencies: [
                "BenchSupport", "PaypipeCore", "ZeroMQ", "Pipeline",
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "bench/driver",
            swiftSettings: strict
        ),
        .testTarget(name: "ZeroMQTests", dependencies: ["ZeroMQ"], swiftSettings: strict),
        .testTarget(name: "PaypipeCoreTests", dependencies: ["PaypipeCore"], swiftSettings: strict),
    ] + providers.map { name in
        .testTarget(
            name: "\(name)Tests",
            dependencies: [.target(name: name), "PaypipeCore"],
            swiftSettings: strict
        )
    }
)
