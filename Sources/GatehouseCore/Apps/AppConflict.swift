/// A change to apps refused because of what is stored, for ``AppService`` to answer.
public enum AppConflict: Error, Sendable, Equatable {
    /// Another app uses the app key (`admin/app-key-taken`).
    case appKeyTaken
}
