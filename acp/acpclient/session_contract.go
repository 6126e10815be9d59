package acpclient

// This file is the part of Session the file system and terminal runtimes
// rely on; session.go has the rest.

// ID returns the session's id.
func (s *Session) ID() string { return s.id }

// Cwd returns the session's working directory (absolute).
func (s *Session) Cwd() string { return s.cwd }

// Roots returns the directories the session's file system is confined to:
// SessionConfig.Roots, by default the cwd and the additional directories.
func (s *Session) Roots() []string { return append([]string(nil), s.roots...) }
