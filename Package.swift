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
        .executableTarget(
            name: "paypipe-zmq-bench",
            dependencies: ["ZeroMQ", "CZeroMQ"],
            path: "bench/zmq",
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
