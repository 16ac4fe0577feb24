import { LabIcon } from '@jupyterlab/ui-components';

/** The panel's icon (`jp-icon3` follows the theme). */
const svgstr = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161">
    <path d="M12 2C7.6 2 4 5.1 4 9.2c0 2.3 1.1 4.3 2.9 5.6V19c0 .6.4 1 1 1h1.6v1.3c0 .4.3.7.7.7h3.6c.4 0 .7-.3.7-.7V20h1.6c.6 0 1-.4 1-1v-4.2c1.8-1.3 2.9-3.3 2.9-5.6C20 5.1 16.4 2 12 2zm0 2c3.4 0 6 2.3 6 5.2 0 1.8-.9 3.3-2.5 4.3l-.5.3V18H9v-4.2l-.5-.3C6.9 12.5 6 11 6 9.2 6 6.3 8.6 4 12 4z"/>
    <path d="M9.5 8.5h5v1.5h-5zM9.5 11h5v1.5h-5z"/>
  </g>
</svg>`;

export const memoryIcon = new LabIcon({ name: 'nbmemory:memory', svgstr });
