/** How a storm's sockets are spread over rooms: shared by the storm and its client processes. */

/** Socket i's room. */
export const roomOf = (i: number, roomSize: number) => `storm-${Math.floor(i / roomSize)}`;

/** Members of a room (the last one may be short). */
export const sizeOf = (room: string, total: number, roomSize: number) =>
  Math.min(roomSize, total - roomSize * Number(room.slice("storm-".length)));
