// Package endpoints tracks what a verbs transport has open (its
// segments and connections) so that Transport.Close can close all of them:
// connections first, so their calls end before the segments that serve
// them go away. Registration of new endpoints fails once the transport is
// closing.
package endpoints
