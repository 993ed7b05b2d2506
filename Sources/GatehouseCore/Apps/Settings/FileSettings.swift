extension AppSettings {
    /// The `files` section: what users may upload and how much they may keep.
    public struct Files: Sendable, Equatable {
        public var maxBytes: Int64 = 5 * 1024 * 1024
        /// The highest `max_bytes` an app may set.
        public static let maxBytesCeiling: Int64 = 100 * 1024 * 1024
        public var photoTypes: [String] = Files.allPhotoTypes
        public static let allPhotoTypes = ["image/jpeg", "image/png", "image/webp", "image/gif"]
        /// Files (photo included) one user may hold, and their bytes in all: over either an
        /// upload is 403 `files/quota-exceeded`. At most the platform's (``PlatformCaps``).
        public var maxFilesPerUser: Int64 = 200
        public var maxBytesPerUser: Int64 = 100 * 1024 * 1024
        /// The sniffed types a file uploaded `public` may have (else 415 `files/unsupported-type`).
        public var publicTypes: [String] = Files.allPhotoTypes
    }
}

extension AppSettings.Files {
    /// Reads the section's fields; the per-user caps are bounded by the platform's ceilings (and
    /// lowered to them when read from storage).
    static func decode(_ f: inout FieldReader, _ context: SettingsDecoding) -> Self {
        var files = Self()
        if let v = f.int("max_bytes", 1024...Self.maxBytesCeiling) { files.maxBytes = v }
        if let v = f.stringArray("photo_types", maxCount: 4) {
            for t in v where !Self.allPhotoTypes.contains(t) {
                f.fail("photo_types", "Unknown type \(t); use \(Self.allPhotoTypes.joined(separator: ", ")).")
            }
            files.photoTypes = uniqued(v)
        }
        let caps = context.caps
        if let v = f.int("max_files_per_user", 1...context.ceiling(caps.filesPerUser)) { files.maxFilesPerUser = min(v, caps.filesPerUser) }
        if let v = f.int("max_bytes_per_user", 1024...context.ceiling(caps.bytesPerUser)) { files.maxBytesPerUser = min(v, caps.bytesPerUser) }
        if let v = f.stringArray("public_types", maxCount: 4) {
            for t in v where !Self.allPhotoTypes.contains(t) {
                f.fail("public_types", "Unknown type \(t); use \(Self.allPhotoTypes.joined(separator: ", ")).")
            }
            files.publicTypes = uniqued(v)
        }
        return files
    }

    var json: JSON {
        [
            "max_bytes": .int(maxBytes), "photo_types": .strings(photoTypes), "max_files_per_user": .int(maxFilesPerUser),
            "max_bytes_per_user": .int(maxBytesPerUser), "public_types": .strings(publicTypes),
        ]
    }
}
