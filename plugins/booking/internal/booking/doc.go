// Package booking is the booking service behind the booking plugin: the
// capabilities booking.resources, booking.availability, booking.list,
// booking.get, booking.create and booking.cancel, on a store.Store.
//
// Times on the wire are RFC 3339; the service answers in UTC. A resource's
// day is a row of equal slots from its opening time: a start is bookable
// when it falls exactly on one, lies in the future and at most a year
// ahead. Whether a slot is still free is never checked here ahead of the
// write: the store's insert decides, so two racing creates cannot both win.
//
// Register wires the service into an sdk.Plugin: it reads the plugin's
// config block, opens <data_dir>/booking.db and seeds the demo data on
// request.
package booking
